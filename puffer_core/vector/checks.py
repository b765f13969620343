"""The checks of a vector env's counts and settings: what ``make`` accepts, and an error
that proposes values that work for what it does not. Every bound is one of
:mod:`puffer_core.specs.limits`'s."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import (
    MAX_ENVS,
    MAX_INFO_BUFFER_BYTES,
    MAX_SECONDS,
    MAX_SPIN_US,
    MAX_WORKERS,
    check_int,
    check_number,
    int_in,
)

__all__ = [
    "available_cpus",
    "check_counts",
    "check_info_buffer_bytes",
    "check_main_share",
    "check_spin_us",
    "check_timeout",
    "format_choices",
    "split_envs",
]


def format_choices(values: Sequence[int], limit: int = 8) -> str:
    values = list(dict.fromkeys(values))
    if len(values) > limit:
        head = ", ".join(str(v) for v in values[: limit - 2])
        return f"{head}, … or {values[-1]}"
    if len(values) == 1:
        return str(values[0])
    return ", ".join(str(v) for v in values[:-1]) + f" or {values[-1]}"


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware, so containers count right)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def split_envs(num_envs: int, num_workers: int) -> list[int]:
    """Env counts per worker: as even as possible, the first workers take the remainder."""
    base, extra = divmod(num_envs, num_workers)
    return [base + (1 if w < extra else 0) for w in range(num_workers)]


def check_counts(
    num_envs: Any, num_workers: Any, batch_size: Any, backend: str, cpu_count: int | None = None
) -> tuple[int, int, int, list[int]]:
    """Validate and default (num_envs, num_workers, batch_size) in env units.

    Returns (num_envs, num_workers, batch_size, envs per worker). A combination that cannot
    work raises APIUsageError that proposes values that do.
    """
    num_envs = check_int("num_envs", num_envs, 1, MAX_ENVS)
    cpus = cpu_count or available_cpus()
    if backend == "serial":
        # Serial steps every env in this process: one "worker"; more would be silently ignored
        if num_workers is not None and check_int("num_workers", num_workers, 1, MAX_WORKERS) != 1:
            raise APIUsageError(
                f"num_workers={num_workers} needs worker processes, but the serial backend steps every env in "
                f"this process; use backend='multiprocessing' (--backend multiprocessing) or leave num_workers unset"
            )
        num_workers = 1
    elif num_workers is None:
        num_workers = min(num_envs, cpus)
    else:
        num_workers = check_int("num_workers", num_workers, 1, MAX_WORKERS)
        if num_workers > num_envs:
            raise APIUsageError(
                f"num_workers {num_workers} is more than num_envs {num_envs}: every worker needs at least one env; "
                f"use num_workers ≤ {num_envs} (e.g. {min(num_envs, cpus)}) or num_envs ≥ {num_workers}"
            )
    if batch_size is None:
        batch_size = num_envs
    batch_size = check_int("batch_size", batch_size, 1, MAX_ENVS)
    if batch_size > num_envs:
        raise APIUsageError(
            f"batch_size {batch_size} is more than num_envs {num_envs}; use a batch_size ≤ {num_envs} "
            f"(it counts environments, like num_envs)"
        )
    counts = split_envs(num_envs, num_workers)
    if batch_size == num_envs:
        return num_envs, num_workers, batch_size, counts

    if backend == "serial":
        if num_envs % batch_size:
            divisors = [d for d in range(1, num_envs + 1) if num_envs % d == 0]
            raise APIUsageError(
                f"batch_size {batch_size} must divide num_envs {num_envs} on the serial backend (envs are stepped "
                f"in fixed groups of batch_size): try {format_choices(divisors)}"
            )
        return num_envs, num_workers, batch_size, counts

    # Batches are made of whole workers, so all workers must hold the same number of envs.
    if num_envs % num_workers:
        workers_ok = [w for w in range(1, num_envs + 1) if num_envs % w == 0 and batch_size % (num_envs // w) == 0]
        raise APIUsageError(
            f"batch_size {batch_size} < num_envs {num_envs} needs the envs split evenly over workers, but "
            f"{num_envs} envs do not split evenly over {num_workers} workers; try num_workers "
            f"{format_choices(workers_ok)} (with batch_size {batch_size}), or batch_size {num_envs}"
        )
    per_worker = num_envs // num_workers
    if batch_size % per_worker:
        batches_ok = list(range(per_worker, num_envs + 1, per_worker))
        workers_ok = [w for w in range(1, num_envs + 1) if num_envs % w == 0 and batch_size % (num_envs // w) == 0]
        raise APIUsageError(
            f"batch_size {batch_size} must be a multiple of the per-worker env count {per_worker} "
            f"({num_envs} envs over {num_workers} workers), since batches are made of whole workers: "
            f"try batch_size {format_choices(batches_ok)}, or keep batch_size {batch_size} with num_workers "
            f"{format_choices(workers_ok)}"
        )
    return num_envs, num_workers, batch_size, counts


def check_timeout(timeout: Any, name: str = "timeout") -> float:
    """A worker's silence limit in seconds: positive, finite and at most a week."""
    return check_number(f"{name} (seconds)", timeout, 0, MAX_SECONDS, low_open=True)


def check_spin_us(spin_us: Any, name: str = "spin_us") -> float | None:
    """How long a waiting side may spin, in µs: None (the default), or a finite number in
    [0, ``MAX_SPIN_US``] (NaN would never spin, 1e12 would spin for days)."""
    return None if spin_us is None else check_number(f"{name} (microseconds)", spin_us, 0, MAX_SPIN_US)


def check_info_buffer_bytes(size: Any, name: str = "info_buffer_bytes") -> int:
    """A worker's mailbox size: an int in [0, ``MAX_INFO_BUFFER_BYTES``] (below 64 bytes it
    holds 64; what does not fit goes over the worker's pipe)."""
    return check_int(name, size, 0, MAX_INFO_BUFFER_BYTES)


def check_main_share(main_share: Any, name: str = "main_share") -> bool | str | int:
    """True, False, "auto", or the envs the main process steps (an int in [1, ``MAX_ENVS``])."""
    if isinstance(main_share, bool) or (isinstance(main_share, str) and main_share == "auto"):
        return main_share
    if not int_in(main_share, 1, MAX_ENVS):
        raise APIUsageError(
            f"{name} must be True, False, 'auto' or a number of envs (an int ≥ 1 and ≤ {MAX_ENVS:,}), "
            f"got {main_share!r}"
        )
    return int(main_share)
