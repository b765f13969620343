"""What the OS says about processes, for tests that check nothing is left running (Linux /proc)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from typing import NamedTuple


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def parent_of(pid: int) -> int:
    """The OS parent of process ``pid`` (a fork server's child has the fork server)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def live_children() -> set[int]:
    """This process's live child processes."""
    me, children = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if parent_of(int(entry)) == me and alive(int(entry)):
                    children.add(int(entry))
            except (OSError, IndexError, ValueError):
                pass  # gone meanwhile
    return children


def wait_gone(pids: list[int], seconds: float = 5.0) -> list[int]:
    """Wait up to ``seconds`` for the processes to end; those still alive."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(map(alive, pids)):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


class Measured(NamedTuple):
    """A finished process: exit code, output, and its peak resident memory in bytes."""

    returncode: int
    stdout: str
    stderr: str
    peak_rss: int


def run_measured(args: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> Measured:
    """Run ``args`` to its end and measure its peak resident memory (``os.wait4``'s ``ru_maxrss``).

    ``timeout`` only keeps a broken test from hanging: the process is killed then."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return Measured(proc.returncode, out.read().decode(), err.read().decode(), usage.ru_maxrss * 1024)
