"""What the OS says about processes, for tests that check nothing is left running (Linux /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple


def default_sigint() -> None:
    """Ctrl-C's default in a child (``preexec_fn``): a test run from a background job
    (``nox ... &``, a CI runner) inherits SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler: the child would never see Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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


def shm_entries() -> set[str]:
    """What /dev/shm holds, but multiprocessing's named semaphores (``sem.mp-…``): a Queue or Lock of
    another test running beside this one (pytest-xdist) makes them, and the vector env makes none
    (its flags live in its memfd mapping), so they cannot be its leak."""
    return {name for name in os.listdir("/dev/shm") if not name.startswith("sem.mp-")}


def wait_gone(pids: list[int], seconds: float = 5.0) -> list[int]:
    """Wait up to ``seconds`` for the processes to end; those still alive."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(map(alive, pids)):
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


class Measured(NamedTuple):
    """A finished Python process: exit code, output, and its peak resident memory in bytes."""

    returncode: int
    stdout: str
    stderr: str
    peak_rss: int


# Runs ``-m MODULE ARGS`` or ``-c CODE ARGS`` and, at exit, writes the process's VmHWM (peak
# resident memory of its own address space) to the file named first. Not os.wait4's
# ru_maxrss: a child started with vfork inherits its parent's peak at exec. The second
# argument caps its address space (0: no cap), so that a regression fails with a MemoryError
# instead of taking the machine's memory.
_MEASURED = """
import atexit, resource, runpy, sys

if int(sys.argv[2]):
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
del sys.argv[2]

def report(path=sys.argv[1]):
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(path, "w") as out:
        out.write(kib)

atexit.register(report)
if sys.argv[2] == "-m":
    sys.argv = sys.argv[3:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    code, sys.argv = sys.argv[3], ["-c", *sys.argv[4:]]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
"""


def run_measured(
    args: list[str], env: dict[str, str] | None = None, max_memory: int = 0, timeout: float = 600
) -> Measured:
    """Run ``python ARGS`` (``-m MODULE …`` or ``-c CODE …``) to its end and measure its peak
    resident memory; ``max_memory`` caps its address space (bytes; 0: no cap). ``timeout`` only
    keeps a broken test from hanging (the process is killed)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak = Path(tmp) / "peak"
        command = [sys.executable, "-c", _MEASURED, str(peak), str(max_memory), *args]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
        return Measured(proc.returncode, proc.stdout, proc.stderr, int(peak.read_text()) * 1024)
