"""The memory of this process and of the worker processes it started, for autotune's RAM per env.

Proportional set size where Linux reports it (``/proc/PID/smaps_rollup``: pages that
forked workers share with the main process count once), else resident set size (from
``/proc`` or psutil).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["child_pids", "memory_mb", "ram_per_env"]


def memory_mb(pid: int) -> tuple[float, str] | None:
    """Memory of process ``pid`` in MB and what was read: "pss" (Linux's proportional set
    size: shared pages split among the processes sharing them), "rss", or None if neither
    /proc nor psutil can tell."""
    for path, key, source in ((f"/proc/{pid}/smaps_rollup", "Pss:", "pss"), (f"/proc/{pid}/status", "VmRSS:", "rss")):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return int(line.split()[1]) / 1024, source  # the kernel reports kB
        except (OSError, ValueError, IndexError):
            continue
    try:
        import psutil  # optional: where /proc is missing (macOS)

        return psutil.Process(pid).memory_info().rss / 2**20, "rss"
    except Exception:
        return None


def child_pids(pid: int | None = None) -> set[int]:
    """Every descendant of ``pid`` (default: this process); empty when it cannot be told."""
    pid = os.getpid() if pid is None else pid
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return _psutil_children(pid)
    children: set[int] = set()
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children.update(int(p) for p in f.read().split())
    for child in list(children):
        children |= child_pids(child)
    return children


def _psutil_children(pid: int) -> set[int]:
    try:
        import psutil

        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except Exception:
        return set()


def ram_per_env(num_envs: int, workers: set[int]) -> tuple[float | None, str | None]:
    """(MB per env, source) over this process and ``workers``; (None, None) if unreadable."""
    readings = [memory_mb(pid) for pid in (os.getpid(), *sorted(workers))]
    known = [r for r in readings if r is not None]
    if not known or readings[0] is None:
        return None, None
    sources = {source for _, source in known}
    return sum(mb for mb, _ in known) / num_envs, "pss" if sources == {"pss"} else "rss"
