"""``make``: the path of one environment from its id to a flat, emulated env.

creator → ``puffer_adapt`` → ``puffer_wrappers`` → postprocess (episode statistics)
→ emulation. Each step's failure is reported naming the env id and the plugin.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import gymnasium

from puffer_core.errors import MissingDependencyError, PluginError
from puffer_core.plugins import PluginSet, get_plugins
from puffer_core.specs import EnvSpec

__all__ = ["make", "make_raw", "missing_requirements"]


def missing_requirements(spec: EnvSpec) -> list[str]:
    """Import names in ``spec.requires`` that cannot be found in this Python."""
    missing = []
    for module in spec.requires:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(module)
    return missing


def _missing_error(spec: EnvSpec, modules: list[str]) -> MissingDependencyError:
    hint = spec.install_hint or f"pip install {' '.join(modules)}"
    return MissingDependencyError(
        f"{spec.id} needs the Python package(s) {', '.join(modules)}, which this Python cannot import. "
        f"Install with: {hint}"
    )


def _is_multiagent(env: Any) -> bool:
    return hasattr(env, "possible_agents")


def _create(spec: EnvSpec, kwargs: dict[str, Any]) -> Any:
    missing = missing_requirements(spec)
    if missing:
        raise _missing_error(spec, missing)
    merged = {**spec.kwargs, **kwargs}
    try:
        return spec.creator(**merged)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in {m.split(".")[0] for m in spec.requires}:
            raise _missing_error(spec, [exc.name]) from exc
        raise


def make_raw(env_id: str, plugins: PluginSet | None = None, **kwargs: Any) -> Any:
    """The env after adaptation and the plugin's wrappers, before postprocess and emulation."""
    plugins = get_plugins() if plugins is None else plugins
    spec = plugins.get_spec(env_id)
    env = _create(spec, kwargs)
    adapted = plugins.adapt(env, spec)
    if adapted is not None:
        env = adapted
    if not isinstance(env, gymnasium.Env) and not _is_multiagent(env):
        raise PluginError(
            f"{env_id}: the creator returned {type(env).__module__}.{type(env).__name__} (api {spec.api!r}), "
            "which no adapter could convert to the Gymnasium or PettingZoo API; "
            "install or enable the adapter plugin for that API (see `puffer plugins`)",
            plugin=spec.plugin,
            field="api",
        )
    for wrapper in plugins.wrappers(spec):
        env = wrapper(env)
    return env


def make(env_id: str, **kwargs: Any) -> Any:
    """The emulated env for ``env_id``: a GymnasiumEmulator or PettingZooEmulator."""
    from puffer_core import emulation, postprocess

    env = make_raw(env_id, **kwargs)
    if _is_multiagent(env):
        env = postprocess.MultiAgentEpisodeStats(env)
    else:
        env = postprocess.EpisodeStats(env)
    return emulation.emulate(env)
