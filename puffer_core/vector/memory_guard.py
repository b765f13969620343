"""Will the envs asked for fit in memory? Checked before a vector env builds them, with one line when not.

``num_envs=65_536`` of NetHack is about 220 GiB: on a shared box that takes every user's runs
down with it (each tank has a memory limit, and the kernel would kill the run at it, minutes
later). So before building :data:`CHECK_FROM` envs or more, the env is made twice in this
process and the second one's resident memory measured (the first pays the imports), times the
envs asked for, plus their observation, reward and flag buffers. When that estimate exceeds the
memory available (``MemAvailable``, or what is left under this process's cgroup limit, a tank's
among them, whichever is less), the vector env is refused with the estimate, what is available
and how to go on anyway: ``PUFFER_NO_MEMORY_CHECK=1``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from puffer_core.errors import APIUsageError

__all__ = ["CHECK_FROM", "OVERRIDE", "available_memory", "check_memory", "estimate_memory"]

#: Fewer envs than this are not measured (a few envs fit anywhere; measuring costs two env builds).
CHECK_FROM = 256
#: The variable that skips the check (set to 1).
OVERRIDE = "PUFFER_NO_MEMORY_CHECK"
GIB = 2**30
#: Bytes a vector env keeps per env row besides the observation: reward, flags, mask, ids, actions.
ROW_BYTES = 64


def _rss() -> int:
    """This process's resident memory in bytes (``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="ascii").strip()
    except OSError:
        return None


def _cgroup_left() -> tuple[int, str] | None:
    """Bytes left under this process's cgroup memory limit (v2, else v1), and where that was read; None without one."""
    own = _read("/proc/self/cgroup") or ""
    for line in own.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: one hierarchy
            base = f"/sys/fs/cgroup{path}"
            limit, used = _read(f"{base}/memory.max"), _read(f"{base}/memory.current")
        elif "memory" in controllers.split(","):
            base = f"/sys/fs/cgroup/memory{path}"
            limit, used = _read(f"{base}/memory.limit_in_bytes"), _read(f"{base}/memory.usage_in_bytes")
        else:
            continue
        if limit and used and limit.isdigit() and used.isdigit() and int(limit) < 2**60:
            return max(0, int(limit) - int(used)), "this container's memory limit"
    return None


def available_memory() -> tuple[int, str]:
    """Bytes available to new envs here, and what says so: ``MemAvailable``, or a container's limit when tighter."""
    found: list[tuple[int, str]] = []
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            found.append((int(line.split()[1]) * 1024, "MemAvailable"))
    left = _cgroup_left()
    if left is not None:
        found.append(left)
    return min(found) if found else (2**62, "no limit known")


def estimate_memory(factory: Any, num_envs: int) -> tuple[int, int, int]:
    """Bytes that ``num_envs`` envs of ``factory`` would take: (total, per env, buffers). One env is made
    first (the imports), then a second, measured; both closed."""
    first = factory()
    try:
        first.reset(seed=0)  # many envs allocate their state at their first reset (NetHack's game)
        before = _rss()
        second = factory()
        second.reset(seed=1)
        per_env = max(0, _rss() - before)
        try:
            rows = int(getattr(second, "num_agents", 1) or 1)
            observation = int(getattr(getattr(second, "observation_space", None), "shape", (0,))[-1] or 0)
            itemsize = int(getattr(getattr(second, "observation_space", None), "dtype", None).itemsize or 1)
        except (AttributeError, TypeError, ValueError, IndexError):
            rows, observation, itemsize = 1, 0, 1
        finally:
            second.close()
    finally:
        first.close()
    buffers = num_envs * rows * (observation * itemsize + ROW_BYTES)
    return per_env * num_envs + buffers, per_env, buffers


def _gib(size: float) -> str:
    return f"{size / GIB:,.1f} GiB" if size >= GIB / 10 else f"{size / 2**20:,.1f} MiB"


def check_memory(factory: Any, num_envs: int, environ: dict[str, str] | None = None) -> None:
    """Refuse ``num_envs`` envs of ``factory`` that would not fit in the memory available (see the module)."""
    environ = os.environ if environ is None else environ
    if num_envs < CHECK_FROM or environ.get(OVERRIDE) == "1":
        return
    total, per_env, buffers = estimate_memory(factory, num_envs)
    available, source = available_memory()
    if total <= available:
        return
    raise APIUsageError(
        f"num_envs={num_envs:,} of {factory.name} would take about {_gib(total)} ({_gib(per_env)} per env, measured, "
        f"plus {_gib(buffers)} of buffers), and {_gib(available)} is available ({source}): ask for fewer envs "
        f"(about {max(1, int(available // max(1, total / num_envs))):,} fit), or set {OVERRIDE}=1 to build them anyway"
    )
