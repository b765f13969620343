"""``make``: the path of one environment from its id to a flat, emulated env.

creator → ``puffer_adapt`` → ``puffer_wrappers`` → postprocess (episode statistics)
→ emulation. Each step's failure is reported naming the env id and the plugin.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import gymnasium
from packaging.requirements import Requirement

from puffer_core.env import emulation, postprocess
from puffer_core.errors import APIUsageError, MissingDependencyError, PluginError
from puffer_core.plugins import PluginSet, get_plugins
from puffer_core.plugins.apis import is_multiagent
from puffer_core.specs.declarations import EnvSpec

__all__ = [
    "SpecCreator",
    "emulate_with_stats",
    "installed_versions",
    "make",
    "make_from_spec",
    "make_raw",
    "missing_requirements",
    "unavailable_reason",
]


def installed_versions(names: Iterable[str]) -> dict[str, str]:
    """``{distribution: version}`` of those of ``names`` installed here (the others left out)."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _requirement_met(requirement: str) -> bool:
    if any(op in requirement for op in "<>=!~"):
        req = Requirement(requirement)
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            return False
        return req.specifier.contains(installed, prereleases=True)
    try:
        return importlib.util.find_spec(requirement) is not None
    except (ImportError, ValueError):
        return False


def missing_requirements(spec: EnvSpec) -> list[str]:
    """Entries of ``spec.requires`` this Python does not meet (missing module, wrong version)."""
    return [requirement for requirement in spec.requires if not _requirement_met(requirement)]


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


def _describe(requirement: str) -> str:
    """``ale-py>=0.9 (found 0.8.1)`` for a version that is too old, else the requirement."""
    if any(op in requirement for op in "<>=!~"):
        try:
            return f"{requirement} (found {metadata.version(Requirement(requirement).name)})"
        except metadata.PackageNotFoundError:
            pass
    return requirement


#: How an install hint that is a command starts; another hint (DeepMind Lab's) reads as it is.
_COMMANDS = ("pip ", "python ", "uv ", "puffer ")


def _missing_error(spec: EnvSpec, modules: list[str]) -> MissingDependencyError:
    hint = spec.install_hint or "pip install " + " ".join(shlex.quote(m) for m in modules)
    if hint.startswith(_COMMANDS):
        hint = f"Install with: {hint}"
    return MissingDependencyError(
        f"{spec.id} needs {', '.join(_describe(m) for m in modules)}, which this Python does not have. {hint}"
    )


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
    except TypeError as exc:
        rejected = _rejected_kwargs(exc, kwargs)
        if rejected:
            raise _kwargs_error(spec, rejected, exc) from exc
        raise


def make_batch_from_spec(spec: EnvSpec, num_envs: int, **kwargs: Any) -> Any:
    """``spec``'s native batch of ``num_envs`` envs (``EnvSpec.batch_creator``), with the spec's
    default kwargs under ``kwargs``; its requirements checked first, as ``make``'s."""
    missing = missing_requirements(spec)
    if missing:
        raise _missing_error(spec, missing)
    if spec.batch_creator is None:
        raise APIUsageError(f"{spec.id} has no native batches: its plugin declares no batch_creator")
    try:
        return spec.batch_creator(num_envs, **{**spec.kwargs, **kwargs})
    except TypeError as exc:
        rejected = _rejected_kwargs(exc, kwargs)
        if rejected:
            raise _kwargs_error(spec, rejected, exc) from exc
        raise


def _rejected_kwargs(exc: TypeError, kwargs: dict[str, Any]) -> list[str]:
    """The caller's kwargs a creator's TypeError names (``unexpected keyword argument 'foo'``)."""
    message = str(exc)
    if "argument" not in message:
        return []
    return [key for key in kwargs if f"'{key}'" in message]


def _kwargs_error(spec: EnvSpec, rejected: list[str], exc: TypeError) -> APIUsageError:
    """The env's own complaint about kwargs it does not take, naming the env and the kwargs."""
    defaults = ", ".join(f"{key}={value!r}" for key, value in spec.kwargs.items())
    return APIUsageError(
        f'{spec.id} does not take kwarg {", ".join(rejected)}: its creator says "{exc}"; drop it or fix its name'
        + (f" (its plugin passes {defaults})" if defaults else "")
    )


def make_raw(env_id: str, plugins: PluginSet | None = None, **kwargs: Any) -> Any:
    """The env after adaptation and the plugin's wrappers, before postprocess and emulation.

    Args:
        env_id: A registered id, ``"<plugin>/<name>"`` (``puffer envs`` lists them).
        plugins: The plugin set to look the id up in (default: the installed plugins).
        **kwargs: Creator kwargs, on top of the spec's defaults.

    Returns:
        The raw env, speaking the Gymnasium or the PettingZoo Parallel API.

    Raises:
        UnknownEnvError: No loaded plugin provides ``env_id`` (the message lists close ids).
        MissingDependencyError: The env's own package is not installed (the message says
            what to install).
        APIUsageError: The creator does not take one of ``kwargs``.
        PluginError: The id is declared twice, or no adapter converts the created env.
    """
    plugins = get_plugins() if plugins is None else plugins
    return _adapted(plugins.get_spec(env_id), plugins, kwargs)


def _adapted(spec: EnvSpec, plugins: PluginSet, kwargs: dict[str, Any]) -> Any:
    """``spec``'s env created, adapted to the Gymnasium or PettingZoo API, and wrapped by its plugin."""
    env = _create(spec, kwargs)
    adapted = plugins.adapt(env, spec)
    if adapted is not None:
        env = adapted
    if not isinstance(env, gymnasium.Env) and not is_multiagent(env):
        raise PluginError(
            f"{spec.id}: the creator returned {type(env).__module__}.{type(env).__name__} (api {spec.api!r}), "
            "which no adapter could convert to the Gymnasium or PettingZoo API; "
            "install or enable the adapter plugin for that API (see `puffer plugins`)",
            plugin=spec.plugin,
            field="api",
        )
    for wrapper in plugins.wrappers(spec):
        env = wrapper(env)
    return env


def make(env_id: str, **kwargs: Any) -> Any:
    """The emulated env for ``env_id``: the raw env with episode statistics, flattened.

    Args:
        env_id: A registered id, ``"<plugin>/<name>"`` (``puffer envs`` lists them).
        **kwargs: Creator kwargs, on top of the spec's defaults.

    Returns:
        A ``GymnasiumEmulator`` (one agent) or a ``PettingZooEmulator`` (several).

    Raises:
        UnknownEnvError: No loaded plugin provides ``env_id``.
        MissingDependencyError: The env's own package is not installed.
        APIUsageError: The creator does not take one of ``kwargs``.
        PluginError: The id is declared twice, or no adapter converts the created env.
        SpaceError: The observation or action space has a leaf that cannot be flattened
            (Text, Sequence, Graph), named by its path.
    """
    return make_from_spec(get_plugins().get_spec(env_id), **kwargs)


def make_from_spec(spec: EnvSpec, **kwargs: Any) -> Any:
    """``make`` of an env whose spec the caller has looked up already (a run resolved once)."""
    raw = _adapted(spec, get_plugins(), kwargs)
    return emulate_with_stats(raw, step_info_keys=spec.step_info_keys)


@dataclass(frozen=True)
class SpecCreator:
    """A creator of ``spec``'s emulated env, for ``vector.make``: each env it builds skips the
    lookup of its id, done once by whoever resolved the run. Picklable where ``spec`` is."""

    spec: EnvSpec

    def __call__(self, **kwargs: Any) -> Any:
        return make_from_spec(self.spec, **kwargs)

    @property
    def __name__(self) -> str:  # what names a creator in messages (EnvFactory.name): the env id
        return self.spec.id


def emulate_with_stats(env: Any, buf: Any = None, step_info_keys: tuple[str, ...] = ()) -> Any:
    """Episode statistics, then the emulator the env's API calls for (writing into ``buf`` if
    given): the last two stages of every env's path, for ``make`` and the vector backends alike.
    ``step_info_keys``: a single-agent env's info keys kept on every step, not only at the end."""
    if is_multiagent(env):
        return emulation.emulate(postprocess.MultiAgentEpisodeStats(env), buf)
    return emulation.emulate(postprocess.EpisodeStats(env, keep_keys=step_info_keys), buf)
