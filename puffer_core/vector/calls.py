"""Calling methods and reading or writing attributes of the envs inside a vector env.

What Gymnasium's ``call`` / ``get_attr`` / ``set_attr`` and Stable-Baselines3's
``env_method`` / ``get_attr`` / ``set_attr`` / ``env_is_wrapped`` need, on every backend:
an ``EnvCall`` travels to wherever the envs live (pickled, for Multiprocessing and Ray),
runs there on each selected env, and comes back as one ``CallResult`` per env. An
exception inside an env is caught and returned, so a failed call never takes the envs down.

Names resolve as gymnasium's ``get_wrapper_attr`` does: on the emulator first, then down
its ``.env`` chain (wrappers, then the raw env), the first layer that has the name wins.
``set`` writes on the layer that has the attribute, else on the emulator.
"""

from __future__ import annotations

import bisect
import pickle
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from puffer_core.errors import EnvCallError

__all__ = ["CallResult", "EnvCall", "is_wrapped", "per_worker", "raise_failures", "run_call", "sendable"]

_MAX_DEPTH = 64


@dataclass
class EnvCall:
    """One request. ``kind``: "call" (``name`` is a method name or a picklable function
    called as ``fn(env, *args, **kwargs)``), "get" or "set" (``values``: one per selected env)."""

    kind: str
    name: str | Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    values: Sequence[Any] = ()


@dataclass
class CallResult:
    env_index: int
    ok: bool
    value: Any = None
    error: str = ""  # "TypeName: message" when not ok
    traceback: str = ""


def per_worker(indices: Sequence[int], request: EnvCall, first_envs: Sequence[int]) -> dict[int, tuple]:
    """Split a request on global env ``indices`` into {worker: (local indices, its request)};
    ``first_envs[w]`` is worker ``w``'s first global env index (ascending)."""
    split: dict[int, tuple[list, list]] = {}
    for k, i in enumerate(indices):
        w = bisect.bisect_right(first_envs, i) - 1
        local, values = split.setdefault(w, ([], []))
        local.append(i - first_envs[w])
        if request.kind == "set":
            values.append(request.values[k])
    return {w: (local, replace(request, values=values)) for w, (local, values) in split.items()}


def _layers(env: Any):
    layer, depth = env, 0
    while layer is not None and depth < _MAX_DEPTH:
        yield layer
        layer, depth = getattr(layer, "env", None), depth + 1


def _has(layer: Any, name: str) -> bool:
    # Look without triggering attribute forwarding (gymnasium 0.29 wrappers warn on it).
    if name in getattr(layer, "__dict__", {}):
        return True
    return any(name in vars(cls) for cls in type(layer).__mro__)


def _owner(env: Any, name: str) -> Any:
    for layer in _layers(env):
        if _has(layer, name):
            return layer
    return None


def resolve(env: Any, name: str) -> Any:
    owner = _owner(env, name)
    if owner is None:
        raise AttributeError(f"neither the emulator nor any layer beneath it ({_chain(env)}) has {name!r}")
    return getattr(owner, name)


def _chain(env: Any) -> str:
    return " → ".join(type(layer).__name__ for layer in _layers(env))


def is_wrapped(env: Any, wrapper_class: type) -> bool:
    """Whether any layer of ``env`` is a ``wrapper_class`` (Stable-Baselines3's ``env_is_wrapped``)."""
    return any(isinstance(layer, wrapper_class) for layer in _layers(env))


def _run_one(env: Any, request: EnvCall, value: Any) -> Any:
    if request.kind == "get":
        return resolve(env, request.name)
    if request.kind == "set":
        setattr(_owner(env, request.name) or env, request.name, value)
        return None
    target = request.name if callable(request.name) else resolve(env, request.name)
    if callable(request.name):
        return target(env, *request.args, **request.kwargs)
    if callable(target):
        return target(*request.args, **request.kwargs)
    return target  # an attribute, as gymnasium's call returns it


def run_call(envs: Sequence[Any], indices: Sequence[int], first_env: int, request: EnvCall) -> list[CallResult]:
    """Run ``request`` on ``envs[i]`` for each local index ``i``; never raises for an env's error."""
    results = []
    for k, i in enumerate(indices):
        value = request.values[k] if request.kind == "set" else None
        try:
            results.append(CallResult(first_env + i, True, _run_one(envs[i], request, value)))
        except Exception as exc:
            results.append(
                CallResult(first_env + i, False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
            )
    return results


def sendable(results: list[CallResult]) -> list[CallResult]:
    """``results`` with each one that cannot be pickled (to cross to the main process)
    replaced by a failure saying so."""
    out = []
    for result in results:
        try:
            pickle.dumps(result.value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            why = f"the result cannot be sent to the main process ({type(exc).__name__}: {exc})"
            result = CallResult(result.env_index, False, error=f"PicklingError: {why}")
        out.append(result)
    return out


def describe(request: EnvCall) -> str:
    name = getattr(request.name, "__qualname__", request.name)
    return {"get": f"get_attr({name!r})", "set": f"set_attr({name!r})"}.get(request.kind, f"call({name!r})")


def raise_failures(results: Sequence[CallResult], request: EnvCall) -> list[Any]:
    """The values, in order; the first failure raises (AttributeError for a missing name)."""
    for result in results:
        if result.ok:
            continue
        message = f"{describe(request)} failed in env {result.env_index}: {result.error}"
        if result.error.startswith("AttributeError:"):
            raise AttributeError(message)
        raise EnvCallError(f"{message}\n{result.traceback.rstrip()}", env_index=result.env_index)
    return [result.value for result in results]
