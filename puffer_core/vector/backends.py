"""The backends by name, and ``make``: a vector env of ``num_envs`` copies of an env on one of them."""

from __future__ import annotations

import os
from typing import Any

from puffer_core.env.factory import EnvFactory
from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import check_flag
from puffer_core.vector.base import VectorEnv
from puffer_core.vector.checks import check_info_buffer_bytes, check_main_share, check_spin_us, check_timeout
from puffer_core.vector.faults import check_max_restarts
from puffer_core.vector.serial import Serial

__all__ = ["BACKENDS", "COMMON_VECTOR_KWARGS", "backend_kwargs_of", "make"]

BACKENDS = ("serial", "multiprocessing", "ray")

_ALIASES = {"serial": "serial", "multiprocessing": "multiprocessing", "mp": "multiprocessing", "ray": "ray"}


def _backend_class(backend: Any) -> type:
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
    env: Any,
    num_envs: int = 1,
    num_workers: int | None = None,
    batch_size: int | None = None,
    backend: Any = "serial",
    seed: int | None = None,
    autoreset: str = "next_step",
    on_fault: str = "raise",
    vector_kwargs: dict[str, Any] | None = None,
    **env_kwargs: Any,
) -> VectorEnv:
    """A vector env of ``num_envs`` copies of ``env``.

    Args:
        env: A registered env id (each copy is ``puffer_core.make(env, **env_kwargs)``) or a
            creator called as ``env(**env_kwargs)`` (zero arguments when none are given); a
            creator's raw Gymnasium / PettingZoo env gets episode statistics and emulation.
        num_envs: Environments (the returned env's ``num_envs`` counts agent rows: envs ×
            agents per env).
        num_workers: Worker processes (Multiprocessing, Ray); default ``min(num_envs, cpus)``.
        batch_size: Environments per ``recv`` (default ``num_envs``); fewer returns whichever
            workers finish first.
        backend: ``"serial"``, ``"multiprocessing"`` or ``"ray"``.
        seed: Seeds the first reset (env ``i`` gets ``seed + i``) unless ``reset`` gets its own.
        autoreset: ``"next_step"``, ``"same_step"`` or ``"disabled"``, as in Gymnasium 1.1+.
        on_fault: ``"raise"``, or ``"restart"`` (Multiprocessing, Ray): a faulted worker is
            replaced and its rows come back truncated with an info ``"fault"``.
        vector_kwargs: Backend settings (``backend_kwargs_of(backend)`` lists the keys each
            takes; Multiprocessing: ``timeout``, ``startup_timeout``, ``start_method``,
            ``spin_us``, ``info_buffer_bytes``, ``max_restarts``, ``main_share``; Ray:
            ``timeout``, ``startup_timeout``, ``actor_options``, ``max_restarts``,
            ``address`` (the cluster: None, ``"auto"``, ``"host:port"``, ``"ray://host:port"``),
            ``placement`` (``"spread"``, ``"pack"`` or None), ``allow_unauthenticated_ray``), and on
            every backend ``check_actions`` (False leaves only ``send``'s shape check) and
            ``record`` (a path, ``.mp4``/``.gif`` for pixel envs or ``.cast`` for text envs, or
            a planned ``Recording``: env 0 records its episodes there, inside the process that
            steps it). Each value is checked against :mod:`puffer_core.specs.limits` before anything
            starts (``spin_us`` 0 to 1,000,000 µs, ``info_buffer_bytes`` 0 to 1 GiB, ``main_share``
            a count up to 65,536, timeouts up to a week, flags True or False).
        **env_kwargs: The env's creator kwargs.

    Returns:
        A ``VectorEnv``: ``reset``, ``step``, and ``async_reset`` / ``send`` / ``recv``.

    Raises:
        APIUsageError: a count, seed, mode or vector_kwargs value that cannot work (an unknown
            key, a timeout that is not a positive finite number of seconds up to a week, a NaN,
            a negative or absurd size, a wrong type), in one line naming it and what works.
        UnknownEnvError: ``env`` is not a registered id.
        RayConnectionError: (Ray) the cluster ``address`` or ``RAY_ADDRESS`` names cannot be
            found, reached or joined: one line naming it and how to start a head.
        WorkerError: a worker could not build its envs (or, Ray, was never scheduled).
    """
    cls = _backend_class(backend)
    backend_kwargs = _check_vector_kwargs(cls, vector_kwargs)
    check_actions = backend_kwargs.pop("check_actions", True)
    factory = EnvFactory(env, env_kwargs, _recording(env, backend_kwargs.pop("record", None), env_kwargs))
    envs = cls(
        factory,
        num_envs=num_envs,
        num_workers=num_workers,
        batch_size=batch_size,
        seed=seed,
        autoreset=autoreset,
        on_fault=on_fault,
        **backend_kwargs,
    )
    envs.check_actions = check_actions
    return envs


#: ``vector_kwargs`` every backend takes (handled here, not by the backend's constructor)
COMMON_VECTOR_KWARGS = ("check_actions", "record")
#: ``vector_kwargs`` only the Ray backend takes, and what each says (for the error elsewhere)
_RAY_ONLY = {
    "address": "the Ray cluster to connect to",
    "placement": "how Ray places the workers over a cluster's nodes",
    "actor_options": "Ray's options of each actor",
    "allow_unauthenticated_ray": "whether Ray may run without token authentication",
}
#: The checks of the vector_kwargs values that need no backend loaded, each called as
#: ``check(value, "vector_kwargs['key']")``; the backends' constructors check the same again
#: (a backend built directly) and the Ray-only and structured ones themselves, before anything
#: starts (``start_method``, ``address``, ``placement``, ``actor_options``,
#: ``allow_unauthenticated_ray``; ``record`` is planned in ``_recording``).
_VALUE_CHECKS = {
    "timeout": check_timeout,
    "startup_timeout": check_timeout,
    "spin_us": check_spin_us,
    "info_buffer_bytes": check_info_buffer_bytes,
    "main_share": check_main_share,
    "max_restarts": check_max_restarts,
    "check_actions": lambda value, name: check_flag(name, value),
}
#: ``make``'s own parameters, which a backend's constructor also takes but ``vector_kwargs`` must not set
_MAKE_PARAMETERS = ("env", "env_kwargs", "num_envs", "num_workers", "batch_size", "seed", "autoreset", "on_fault")


def backend_kwargs_of(cls: type) -> list[str]:
    """The ``vector_kwargs`` keys backend ``cls`` takes: its constructor's own keyword
    parameters, plus ``COMMON_VECTOR_KWARGS``."""
    import inspect

    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(cls.__init__).parameters.values()
    own = [p.name for p in parameters if p.kind in keyword and p.name not in ("self", *_MAKE_PARAMETERS)]
    return sorted({*own, *COMMON_VECTOR_KWARGS})


def _check_vector_kwargs(cls: type, vector_kwargs: Any) -> dict[str, Any]:
    """``vector_kwargs`` as a dict of keys ``cls`` takes, their values checked (``_VALUE_CHECKS``);
    one-line errors otherwise."""
    if vector_kwargs is None:
        return {}
    if not isinstance(vector_kwargs, dict):
        raise APIUsageError(f"vector_kwargs must be a dict, got {type(vector_kwargs).__name__}")
    known = backend_kwargs_of(cls)
    unknown = sorted(str(key) for key in vector_kwargs if key not in known)
    ray_only = [key for key in unknown if key in _RAY_ONLY]
    if ray_only:
        one = len(ray_only) == 1
        what = "; ".join(f"{key!r}: {_RAY_ONLY[key]}" for key in ray_only)
        raise APIUsageError(
            f"vector_kwargs {', '.join(map(repr, ray_only))} {'is a Ray setting' if one else 'are Ray settings'} "
            f"({what}) that the {cls.__name__} backend does not take; use backend='ray', or drop "
            f"{'it' if one else 'them'}"
        )
    if unknown:
        raise APIUsageError(
            f"vector_kwargs {', '.join(map(repr, unknown))} not taken by the {cls.__name__} backend; "
            f"it takes: {', '.join(known)}"
        )
    checked = dict(vector_kwargs)
    for key, check in _VALUE_CHECKS.items():
        if key in checked:
            checked[key] = check(checked[key], f"vector_kwargs[{key!r}]")
    return checked


def _recording(env: Any, record: Any, env_kwargs: dict[str, Any]) -> Any:
    """``vector_kwargs["record"]``: a path (checked here, in the main process) or a planned ``Recording``."""
    if record is None:
        return None
    from puffer_core.env.recording import Recording, plan_recording  # deferred: only a recording run needs it

    if isinstance(record, Recording):
        return record
    if not isinstance(record, (str, os.PathLike)):
        raise APIUsageError(
            f"vector_kwargs['record'] must be a path (.mp4, .gif or .cast) or a planned Recording, got {record!r}"
        )
    return plan_recording(env, record, env_kwargs)
