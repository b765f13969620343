"""Vector envs: Serial, Multiprocessing and Ray backends behind one ``make``.

See :mod:`puffer_core.vector.backends` for ``make``, :mod:`puffer_core.vector.base` for
the API every backend shares (units, infos, autoreset), :mod:`puffer_core.vector.mp` for
the shared-memory / pipe design of Multiprocessing, and
:mod:`puffer_core.vector.ray_backend` for Ray.
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
        from puffer_core.vector.ray_backend import Ray  # deferred: Ray is an optional extra

        return Ray
    raise AttributeError(f"module 'puffer_core.vector' has no attribute {name!r}")


def to_gymnasium(envs: VectorEnv, copy: bool = False) -> Any:
    """``envs`` as a ``gymnasium.vector.VectorEnv`` (see :mod:`puffer_core.vector.gymnasium_vector`)."""
    from puffer_core.vector.gymnasium_vector import to_gymnasium as convert  # gymnasium ≥ 1.1 only

    return convert(envs, copy=copy)


def to_sb3(envs: VectorEnv) -> Any:
    """``envs`` as a Stable-Baselines3 ``VecEnv`` (see :mod:`puffer_core.vector.sb3_vec_env`)."""
    from puffer_core.vector.sb3_vec_env import to_sb3 as convert  # deferred: imports SB3 and torch

    return convert(envs)


def autotune(env: Any, num_envs: int | None = None, budget: float = 60.0, **kwargs: Any) -> dict[str, Any]:
    """Measure Serial and Multiprocessing settings on ``env`` within ``budget`` seconds and
    print the fastest as a ``vector.make(...)`` call (see :mod:`puffer_core.vector.autotuner`)."""
    from puffer_core.vector.autotuner import autotune as run  # deferred: making envs needs none of the measuring

    return run(env, num_envs, budget, **kwargs)
