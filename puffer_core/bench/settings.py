"""What the benches measure: the standard envs, the worker / batch grids, whether an env can run here."""

from __future__ import annotations

from puffer_core.environments import missing_requirements
from puffer_core.errors import APIUsageError
from puffer_core.plugins import get_plugins
from puffer_core.vector.base import available_cpus, check_counts

__all__ = ["STANDARD", "main_share_settings", "mp_settings", "unavailable_reason"]

#: The standard set: env id → num_envs.
STANDARD: dict[str, int] = {"classic/cartpole": 16, "atari/breakout": 8, "nethack/score": 8}


def mp_settings(num_envs: int, cpus: int | None = None) -> list[tuple[int, int]]:
    """(num_workers, batch_size) pairs worth measuring: 1 worker, one per core, two per
    core, each synchronous and (where valid) EnvPool-style with half the envs per batch."""
    cpus = cpus or available_cpus()
    out = []
    for workers in sorted({1, min(cpus, num_envs), min(2 * cpus, num_envs)}):
        for batch in (num_envs, num_envs // 2):
            if batch < 1 or (workers == 1 and batch != num_envs):
                continue
            try:
                check_counts(num_envs, workers, batch, "multiprocessing")
            except APIUsageError:
                continue
            if (workers, batch) not in out:
                out.append((workers, batch))
    return out


def main_share_settings(num_envs: int, cpus: int | None = None) -> list[tuple[int, int]]:
    """(num_workers, batch_size) pairs with the main process stepping one more share
    (``main_share``): one worker fewer than cores (the main process takes the last one) and
    as many as cores, each synchronous and, where valid, with half the envs per batch."""
    cpus = cpus or available_cpus()
    out = []
    for workers in sorted({max(1, min(cpus, num_envs) - 1), min(cpus, num_envs - 1)}):
        if workers < 1:
            continue
        for batch in (num_envs, num_envs // 2):
            try:
                check_counts(num_envs, workers + 1, batch, "multiprocessing")
            except APIUsageError:
                continue
            if batch >= 1 and (workers, batch) not in out:
                out.append((workers, batch))
    return out


def unavailable_reason(env_id: str) -> str | None:
    """None when env_id can be built here, else why not."""
    try:
        spec = get_plugins().get_spec(env_id)
    except Exception as exc:
        return f"{env_id}: not available ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    missing = missing_requirements(spec)
    if missing:
        return f"{env_id}: skipped, missing {', '.join(missing)}"
    return None
