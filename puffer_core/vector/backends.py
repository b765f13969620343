"""The backends by name, and ``make``: a vector env of ``num_envs`` copies of an env on one of them."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from puffer_core.env.factory import RecordingPlan
from puffer_core.errors import APIUsageError, WorkerError
from puffer_core.vector.base import VectorEnv
from puffer_core.vector.mp.start import IMPORT_TIME_CAUSE
from puffer_core.vector.serial import Serial
from puffer_core.vector.vector_settings import MOVED_TO_MAKE, VectorSettings

__all__ = ["BACKENDS", "backend_kwargs_of", "make"]

BACKENDS = ("serial", "multiprocessing", "ray")

_ALIASES = {"serial": "serial", "multiprocessing": "multiprocessing", "mp": "multiprocessing", "ray": "ray"}


def _backend_class(backend: Any) -> type[VectorEnv]:
    if isinstance(backend, type) and issubclass(backend, VectorEnv):
        return backend
    key = _ALIASES.get(backend.lower()) if isinstance(backend, str) else None
    if key is None:
        raise APIUsageError(f"backend must be one of {', '.join(repr(b) for b in BACKENDS)}, got {backend!r}")
    if key == "serial":
        return Serial
    if key == "multiprocessing":
        from puffer_core.vector.mp import Multiprocessing  # deferred: loads only for this backend

        return Multiprocessing
    from puffer_core.vector.ray import Ray  # deferred: Ray is an optional extra

    return Ray


def make(
    env: str | Callable[..., Any],
    num_envs: int = 1,
    num_workers: int | None = None,
    batch_size: int | None = None,
    backend: str | type[VectorEnv] = "serial",
    seed: int | None = None,
    autoreset: str = "next_step",
    on_fault: str = "raise",
    vector_kwargs: dict[str, Any] | None = None,
    record: str | os.PathLike[str] | RecordingPlan | None = None,
    check_actions: bool = True,
    **env_kwargs: Any,
) -> VectorEnv:
    """A vector env of ``num_envs`` copies of ``env``.

    Args:
        env: A registered env id (each copy is ``puffer_core.make(env, **env_kwargs)``) or a
            creator called as ``env(**env_kwargs)`` (zero arguments when none are given); a
            creator's raw Gymnasium / PettingZoo env gets episode statistics and emulation.
        num_envs: Environments (the returned env's ``num_envs`` counts agent rows: envs ×
            agents per env).
        num_workers: Worker processes (Multiprocessing, Ray); default ``min(num_envs, cpus)``. Serial
            has none: more than 1 there is refused (``APIUsageError``).
        batch_size: Environments per ``recv`` (default ``num_envs``); fewer returns whichever
            workers finish first.
        backend: ``"serial"``, ``"multiprocessing"`` or ``"ray"`` (or a ``VectorEnv`` subclass).
        seed: Seeds the first reset (env ``i`` gets ``seed + i``) unless ``reset`` gets its own.
        autoreset: ``"next_step"``, ``"same_step"`` or ``"disabled"``, as in Gymnasium 1.1+.
        on_fault: ``"raise"``, or ``"restart"`` (Multiprocessing, Ray): a faulted worker is
            replaced and its rows come back truncated with an info ``"fault"``.
        vector_kwargs: The backend's own settings (``backend_kwargs_of(backend)`` lists the keys
            each takes; Multiprocessing: ``timeout``, ``startup_timeout``, ``start_method``,
            ``spin_us``, ``info_buffer_bytes``, ``max_restarts``, ``main_share``; Ray:
            ``timeout``, ``startup_timeout``, ``actor_options``, ``max_restarts``,
            ``address`` (the cluster: None, ``"auto"``, ``"host:port"``, ``"ray://host:port"``),
            ``placement`` (``"spread"``, ``"pack"`` or None), ``allow_unauthenticated_ray``;
            Serial: none). Each value is checked against :mod:`puffer_core.specs.limits` before
            anything starts (``spin_us`` 0 to 1,000,000 µs, ``info_buffer_bytes`` 0 to 1 GiB,
            ``main_share`` a count up to 65,536, timeouts up to a week, flags True or False).
        record: A path (``.mp4``/``.gif`` for pixel envs or ``.cast`` for text envs) or a
            planned ``Recording``: env 0 records its episodes there, inside the process that
            steps it (every backend).
        check_actions: ``send`` checks each action's dtype and range (False leaves only its
            shape check).
        **env_kwargs: The env's creator kwargs.

    Returns:
        A ``VectorEnv``: ``reset``, ``step``, and ``async_reset`` / ``send`` / ``recv``.

    Raises:
        APIUsageError: a count, seed, mode, ``record`` or vector_kwargs value that cannot work
            (an unknown key, a timeout that is not a positive finite number of seconds up to a
            week, a NaN, a negative or absurd size, a wrong type), in one line naming it and
            what works.
        UnknownEnvError: ``env`` is not a registered id.
        RayConnectionError: (Ray) the cluster ``address`` or ``RAY_ADDRESS`` names cannot be
            found, reached or joined: one line naming it and how to start a head.
        WorkerError: a worker could not build its envs (or, Ray, was never scheduled).
    """
    cls = _backend_class(backend)
    options = cls.Options.checked(_vector_kwargs(vector_kwargs), cls.__name__, via_make=True)
    common = (env, num_envs, num_workers, batch_size, seed, env_kwargs, autoreset, on_fault)
    settings = VectorSettings.check(cls.backend, options, *common, record=record, check_actions=check_actions)
    try:
        return cls.from_settings(settings)
    except WorkerError as exc:
        if exc.cause == IMPORT_TIME_CAUSE:  # the fix is in the script: its line, not our frames
            raise exc.with_traceback(None) from None
        raise


def backend_kwargs_of(backend: str | type[VectorEnv]) -> list[str]:
    """The ``vector_kwargs`` keys ``backend`` takes (a name as ``make`` takes it, or a class):
    the fields of its ``Options``.

    Raises:
        APIUsageError: ``backend`` names no backend.
    """
    return _backend_class(backend).Options.keys()


def _vector_kwargs(vector_kwargs: Any) -> dict[str, Any]:
    """``vector_kwargs`` as a dict (its keys and values are the backend's ``Options`` to check)."""
    if vector_kwargs is None:
        return {}
    if not isinstance(vector_kwargs, dict):
        raise APIUsageError(f"vector_kwargs must be a dict, got {type(vector_kwargs).__name__}")
    for key, what in MOVED_TO_MAKE.items():
        if key in vector_kwargs:
            raise APIUsageError(f"vector_kwargs[{key!r}] is a parameter of vector.make: pass {key}=… ({what}) instead")
    return vector_kwargs
