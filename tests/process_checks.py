"""What the OS says about processes, for tests that check nothing is left running (Linux /proc)."""

from __future__ import annotations

import os
import time


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
