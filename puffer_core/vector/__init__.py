"""Vector envs: Serial, Multiprocessing and Ray backends behind one ``make``.

See :mod:`puffer_core.vector.backends` for ``make``, :mod:`puffer_core.vector.vector_settings`
for the settings every backend is built from (checked once), :mod:`puffer_core.vector.base` for
the API every backend shares (units, infos, autoreset), :mod:`puffer_core.vector.mp` for
the shared-memory / pipe design of Multiprocessing, and
:mod:`puffer_core.vector.ray` for Ray.
"""

from __future__ import annotations

from typing import Any

from puffer_core.vector.autoreset import AUTORESET_MODES
from puffer_core.vector.backends import BACKENDS, backend_kwargs_of, make
from puffer_core.vector.base import VectorEnv
from puffer_core.vector.checks import check_counts
from puffer_core.vector.serial import Serial

__all__ = [
    "AUTORESET_MODES",
    "BACKENDS",
    "Multiprocessing",
    "Ray",
    "Serial",
    "VectorEnv",
    "autotune",
    "backend_kwargs_of",
    "check_counts",
    "make",
    "to_gymnasium",
    "to_sb3",
]


def __getattr__(name: str) -> Any:
    if name == "Multiprocessing":
        from puffer_core.vector.mp import Multiprocessing  # deferred: loads only for this backend

        return Multiprocessing
    if name == "Ray":
        from puffer_core.vector.ray import Ray  # deferred: Ray is an optional extra

        return Ray
    raise AttributeError(f"module 'puffer_core.vector' has no attribute {name!r}")


def to_gymnasium(envs: VectorEnv, copy: bool = False) -> Any:
    """The same envs as a ``gymnasium.vector.VectorEnv`` (Gymnasium ≥ 1.1).

    Infos become Gymnasium's dict of arrays with ``_key`` masks, same-step final observations
    ``final_obs``, and ``metadata["autoreset_mode"]`` says the mode.

    Args:
        envs: A vector env from ``vector.make`` that steps every row at once
            (``batch_size == num_envs``).
        copy: Hand out copies of the arrays, as Gymnasium's own vector envs do by default,
            instead of the backend's buffers (valid until the next step).

    Returns:
        A ``gymnasium.vector.VectorEnv`` over ``envs``; closing it closes them.

    Raises:
        APIUsageError: ``envs`` is not a Puffer vector env, or returns partial batches.
        MissingDependencyError: The installed gymnasium is older than 1.1.
    """
    from puffer_core.vector.gymnasium_vector import to_gymnasium as convert  # gymnasium ≥ 1.1 only

    return convert(envs, copy=copy)


def to_sb3(envs: VectorEnv) -> Any:
    """The same envs as a Stable-Baselines3 ``VecEnv``, stepping as SB3's ``DummyVecEnv`` does.

    Each step's observations are copied once (SB3 keeps the previous ones across ``step``);
    infos carry ``"terminal_observation"``, ``"TimeLimit.truncated"`` and ``"episode"``.

    Args:
        envs: A vector env from ``vector.make(..., autoreset="same_step")`` that steps every
            row at once, whose observation leaves share one dtype.

    Returns:
        A ``stable_baselines3.common.vec_env.VecEnv`` over ``envs``.

    Raises:
        APIUsageError: ``envs`` cannot be an SB3 VecEnv (another autoreset mode, partial
            batches, mixed-dtype observations); the message says what works instead.
        MissingDependencyError: Stable-Baselines3 is not installed
            (``pip install 'puffer-core[sb3]'``).
    """
    from puffer_core.vector.sb3_vec_env import to_sb3 as convert  # deferred: imports SB3 and torch

    return convert(envs)


def autotune(env: Any, num_envs: int | None = None, budget: float = 60.0, **kwargs: Any) -> dict[str, Any]:
    """Measure Serial and Multiprocessing settings on ``env`` and print the fastest as a
    ``vector.make(...)`` call to paste.

    Each setting (1, cores − 1, cores and 2 × cores workers; full and half batches; with and
    without the main process's share) is built and stepped with random actions, in at least
    two interleaved rounds within the budget.

    Args:
        env: What ``vector.make`` takes: an env id or a zero-argument creator.
        num_envs: Envs per setting (default: the standard bench count for the env).
        budget: Seconds for the whole measurement, building included.
        **kwargs: ``rounds`` (≥ 2), ``seed``, ``cpus`` (the grid's core count; default the
            CPUs this process may use), ``progress(name, done, total)``, ``verbose`` (print;
            default True), and the env's creator kwargs.

    Returns:
        ``{"env", "num_envs", "cpus", "budget_seconds", "seconds", "rounds", "rows", "best",
        "make_kwargs", "make_call"}``: each row has ``sps``, ``ram_per_env_mb``,
        ``reset_fraction`` and ``error`` (a setting that fails is reported in its row).

    Raises:
        APIUsageError: A count, budget or ``rounds`` that cannot work.
        PufferError: Serial itself cannot build or step the env (its error: unknown id,
            missing package, …), or no setting could be measured.
    """
    from puffer_core.vector.autotuner import autotune as run  # deferred: making envs needs none of the measuring

    return run(env, num_envs, budget, **kwargs)
