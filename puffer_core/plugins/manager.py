"""The plugin manager: discovers plugins, loads each in isolation, validates, indexes envs.

Built-in plugins (the ``classic`` environments, the compatibility adapters) are loaded
through the same path as entry points of the ``puffer`` group, so everything here applies
to them too. A plugin that fails to import, registers an unknown hook or returns a bad
value is marked ``failed`` with its cause and unregistered; the others keep working.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as metadata
import os
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from puffer_core import hooks
from puffer_core.errors import PluginError, UnknownEnvError
from puffer_core.specs import CompatAxes, DockerLayer, EnvSpec, plugin_name_problem

__all__ = [
    "BUILTIN_PLUGINS",
    "DISABLE_ENV",
    "LOAD_ENV",
    "PluginInfo",
    "PluginSet",
    "get_plugins",
    "load_plugins",
    "reset_plugins",
]

DISABLE_ENV = "PUFFER_DISABLE_PLUGINS"
LOAD_ENV = "PUFFER_LOAD_PLUGINS"

#: Built-in plugins: name -> "module" or "module:attribute".
BUILTIN_PLUGINS: dict[str, str] = {
    "classic": "puffer_core.plugins.builtin.classic",
    "gym": "puffer_core.adapters:GymAdapter",
    "pettingzoo-legacy": "puffer_core.adapters:LegacyPettingZooAdapter",
}

# Status values shown by `puffer plugins`.
LOADED, FAILED, DISABLED, NOT_SELECTED = "loaded", "failed", "disabled", "not selected"

#: The plugins this project publishes (its plugins/ folder), plugin name -> distribution: the
#: only names an install hint may suggest. A hint built from an id (one read from a file, or
#: a typo) would point at a name anyone can register on the package index.
PUBLISHED_PLUGINS: dict[str, str] = {
    name: f"puffer-plugin-{name}" for name in ("atari", "dmlab", "nethack", "pettingzoo")
}


@dataclass
class PluginInfo:
    """What `puffer plugins` reports about one plugin."""

    name: str
    source: str  # "builtin" or "entry point"
    target: str  # what was imported: "module" or "module:attr"
    distribution: str | None = None
    version: str | None = None
    status: str = LOADED
    error: str | None = None
    traceback: str | None = None
    hooks: list[str] = field(default_factory=list)
    envs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "target": self.target,
            "distribution": self.distribution,
            "version": self.version,
            "status": self.status,
            "error": self.error,
            "hooks": self.hooks,
            "envs": self.envs,
        }


@dataclass
class _Candidate:
    name: str
    source: str
    target: str
    load: Callable[[], Any]
    distribution: str | None = None
    version: str | None = None

    def info(self, status: str = LOADED, error: str | None = None) -> PluginInfo:
        return PluginInfo(
            self.name, self.source, self.target, self.distribution, self.version, status=status, error=error
        )


def _split_names(value: str | None) -> list[str]:
    if value is None:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


def _import_target(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def _entry_point_candidates(entry_points: Iterable[metadata.EntryPoint]) -> list[_Candidate]:
    found = []
    for ep in entry_points:
        dist = getattr(ep, "dist", None)
        found.append(
            _Candidate(
                name=ep.name,
                source="entry point",
                target=ep.value,
                load=ep.load,
                distribution=dist.metadata["Name"] if dist is not None else None,
                version=dist.version if dist is not None else None,
            )
        )
    return sorted(found, key=lambda c: (c.name, c.distribution or ""))


def _short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0] if text else type(exc).__name__


class PluginSet:
    """Every plugin found, the pluggy manager of the loaded ones, and the env index."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hooks.PROJECT)
        self.pm.add_hookspecs(hooks)
        self.plugins: dict[str, PluginInfo] = {}
        self.env_specs: dict[str, EnvSpec] = {}
        self.env_owner: dict[str, str] = {}
        #: env id -> every plugin that claims it (only ids claimed more than once).
        self.duplicates: dict[str, list[str]] = {}
        self.docker_layers: dict[str, DockerLayer] = {}
        self.compat_axes: dict[str, CompatAxes] = {}
        #: Problems with the selection itself (unknown names in the env variables).
        self.warnings: list[str] = []

    # -- loading ------------------------------------------------------------------------

    def _load(self, cand: _Candidate) -> None:
        info = cand.info()
        self.plugins[cand.name] = info
        try:
            problem = plugin_name_problem(cand.name)
            if problem:
                raise PluginError(problem, plugin=cand.name)
            try:
                obj = cand.load()
            except (Exception, SystemExit) as exc:  # a plugin calling sys.exit() must not end us
                raise PluginError(
                    f"plugin '{cand.name}' failed to import ({cand.target}): {_short_error(exc)}",
                    plugin=cand.name,
                ) from exc
            self._register(cand.name, obj, info)
        except Exception as exc:
            info.status = FAILED
            info.error = str(exc) if isinstance(exc, PluginError) else f"plugin '{cand.name}': {_short_error(exc)}"
            info.traceback = "".join(traceback.format_exception(exc))
            info.envs = []
            info.hooks = []
            if self.pm.get_plugin(cand.name) is not None:
                self.pm.unregister(name=cand.name)

    def _register(self, name: str, obj: Any, info: PluginInfo) -> None:
        if isinstance(obj, type):  # an entry point may name a plugin class; hooks live on an instance
            try:
                obj = obj()
            except Exception as exc:
                raise PluginError(f"plugin '{name}': {obj.__name__}() raised {_short_error(exc)}", plugin=name) from exc
        unknown = [
            attr
            for attr in dir(obj)
            if attr.startswith("puffer_")
            and self.pm.parse_hookimpl_opts(obj, attr) is not None
            and not hasattr(hooks, attr)
        ]
        if unknown:
            known = ", ".join(h for h in hooks.__all__ if h.startswith("puffer_"))
            raise PluginError(
                f"plugin '{name}' implements unknown hook(s) {', '.join(unknown)}; known hooks: {known}",
                plugin=name,
                field=unknown[0],
            )
        try:
            self.pm.register(obj, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"plugin '{name}' could not be registered: {exc}", plugin=name) from exc
        impls = {
            hook_name: impl
            for hook_name in hooks.__all__
            if hook_name.startswith("puffer_")
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls()
            if impl.plugin_name == name
        }
        info.hooks = sorted(impls)
        specs = self._call_envs(name, impls.get("puffer_envs"))
        layer = self._call_single(name, impls.get("puffer_docker_layer"), DockerLayer, "puffer_docker_layer")
        axes = self._call_single(name, impls.get("puffer_compat_axes"), CompatAxes, "puffer_compat_axes")
        # Only now, with every value valid, does the plugin become visible.
        for spec in specs:
            self.env_specs.setdefault(spec.id, spec)
            claimed_by = self.env_owner.setdefault(spec.id, name)
            if claimed_by != name:
                owners = self.duplicates.setdefault(spec.id, [claimed_by])
                owners.append(name)
        info.envs = [spec.id for spec in specs]
        if layer is not None:
            self.docker_layers[name] = layer
        if axes is not None:
            self.compat_axes[name] = axes

    def _call_envs(self, name: str, impl: Any) -> list[EnvSpec]:
        if impl is None:
            return []
        try:
            result = impl.function()
        except Exception as exc:
            raise PluginError(f"plugin '{name}': puffer_envs() raised {_short_error(exc)}", plugin=name) from exc
        if result is None:
            return []
        if isinstance(result, EnvSpec) or not isinstance(result, (list, tuple)):
            raise PluginError(
                f"plugin '{name}': puffer_envs() must return a list of EnvSpec, got {type(result).__name__}",
                plugin=name,
                field="puffer_envs",
            )
        seen: set[str] = set()
        for item in result:
            if not isinstance(item, EnvSpec):
                raise PluginError(
                    f"plugin '{name}': puffer_envs() returned {item!r}, which is not a puffer_core.EnvSpec",
                    plugin=name,
                    field="puffer_envs",
                )
            item.validate(name)
            if item.id in seen:
                raise PluginError(f"plugin '{name}' declares env id {item.id!r} twice", plugin=name, field="id")
            seen.add(item.id)
        return list(result)

    def _call_single(self, name: str, impl: Any, kind: type, hook_name: str) -> Any:
        if impl is None:
            return None
        try:
            result = impl.function()
        except Exception as exc:
            raise PluginError(f"plugin '{name}': {hook_name}() raised {_short_error(exc)}", plugin=name) from exc
        if result is None:
            return None
        if not isinstance(result, kind):
            raise PluginError(
                f"plugin '{name}': {hook_name}() must return a puffer_core.{kind.__name__}, "
                f"got {type(result).__name__}",
                plugin=name,
                field=hook_name,
            )
        result.validate(name)
        return result

    # -- lookup -------------------------------------------------------------------------

    def loaded(self) -> list[str]:
        return [name for name, info in self.plugins.items() if info.status == LOADED]

    def env_ids(self) -> list[str]:
        return sorted(self.env_specs)

    def get_spec(self, env_id: str) -> EnvSpec:
        """The spec for ``env_id``; a clear error for unknown, duplicated or blocked ids."""
        if env_id in self.duplicates:
            owners = self.duplicates[env_id]
            raise PluginError(
                f"env id {env_id!r} is declared by more than one plugin ({', '.join(owners)}); "
                f"disable all but one, e.g. {DISABLE_ENV}={owners[-1]}",
                plugin=owners[-1],
                field="id",
            )
        spec = self.env_specs.get(env_id)
        if spec is not None:
            return spec
        raise UnknownEnvError(self._unknown_message(env_id))

    def _unknown_message(self, env_id: str) -> str:
        plugin = env_id.split("/", 1)[0] if "/" in env_id else None
        lines = [f"unknown environment {env_id!r}."]
        if plugin is not None and plugin in self.plugins and self.plugins[plugin].status != LOADED:
            info = self.plugins[plugin]
            lines.append(f"Its plugin {plugin!r} did not load ({info.status}): {info.error}")
        elif plugin is not None and plugin not in self.plugins:
            hint = f" (try: pip install {PUBLISHED_PLUGINS[plugin]})" if plugin in PUBLISHED_PLUGINS else ""
            lines.append(f"No plugin named {plugin!r} is installed{hint}.")
        names = {spec_id.split("/", 1)[1]: spec_id for spec_id in self.env_specs}
        close = difflib.get_close_matches(env_id, list(self.env_specs), n=3, cutoff=0.8)
        if "/" not in env_id:
            close += [names[n] for n in difflib.get_close_matches(env_id.lower(), list(names), n=3, cutoff=0.6)]
        close = list(dict.fromkeys(close))
        if close:
            lines.append("Did you mean: " + ", ".join(close) + "?")
        lines.append("Run `puffer envs` to list every environment.")
        return " ".join(lines)

    # -- hook calls used by make() ------------------------------------------------------

    def adapt(self, env: Any, spec: EnvSpec) -> Any:
        return self.pm.hook.puffer_adapt(env=env, spec=spec)

    def wrappers(self, spec: EnvSpec) -> list[Callable[[Any], Any]]:
        """Wrappers for ``spec`` in plugin registration order, each plugin's in its own order."""
        found: list[Callable[[Any], Any]] = []
        # pluggy calls the last-registered plugin first; reverse to registration order.
        for result in reversed(self.pm.hook.puffer_wrappers(spec=spec)):
            if result is None:
                continue
            if callable(result) and not isinstance(result, (list, tuple)):
                result = [result]
            for wrapper in result:
                if not callable(wrapper):
                    raise PluginError(
                        f"a puffer_wrappers() result for {spec.id!r} is {wrapper!r}, which is not callable",
                        plugin=spec.plugin,
                        field="puffer_wrappers",
                    )
                found.append(wrapper)
        return found


def load_plugins(
    entry_points: Iterable[metadata.EntryPoint] | None = None,
    builtins: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> PluginSet:
    """Discover and load every plugin, honouring PUFFER_DISABLE_PLUGINS / PUFFER_LOAD_PLUGINS.

    ``PUFFER_DISABLE_PLUGINS=a,b`` blocks plugins by name (built-ins included).
    ``PUFFER_LOAD_PLUGINS=a,b`` loads only those installed plugins (built-ins still load
    unless disabled); set it empty to load no installed plugin at all.
    """
    environ = os.environ if environ is None else environ
    builtins = BUILTIN_PLUGINS if builtins is None else builtins
    if entry_points is None:
        entry_points = metadata.entry_points(group=hooks.PROJECT)
    disabled = set(_split_names(environ.get(DISABLE_ENV)))
    selected = None if environ.get(LOAD_ENV) is None else set(_split_names(environ.get(LOAD_ENV)))

    candidates = [
        _Candidate(name, "builtin", target, (lambda t=target: _import_target(t))) for name, target in builtins.items()
    ]
    candidates += _entry_point_candidates(entry_points)

    plugins = PluginSet()
    for cand in candidates:
        if cand.name in plugins.plugins:
            first = plugins.plugins[cand.name]
            plugins.warnings.append(
                f"plugin name '{cand.name}' is provided twice: by {first.distribution or first.source} "
                f"and by {cand.distribution or cand.source}; only the first is used — uninstall one"
            )
            continue
        if cand.name in disabled:
            plugins.plugins[cand.name] = cand.info(DISABLED, f"disabled by {DISABLE_ENV}")
        elif selected is not None and cand.source != "builtin" and cand.name not in selected:
            plugins.plugins[cand.name] = cand.info(NOT_SELECTED, f"not listed in {LOAD_ENV}")
        else:
            plugins._load(cand)

    for var, names in ((DISABLE_ENV, disabled), (LOAD_ENV, selected or set())):
        for name in sorted(names - set(plugins.plugins)):
            plugins.warnings.append(f"{var} names '{name}', but no installed plugin has that name")
    for env_id, owners in sorted(plugins.duplicates.items()):
        plugins.warnings.append(
            f"env id {env_id!r} is declared by plugins {' and '.join(owners)}; it is unavailable until "
            f"one of them is disabled ({DISABLE_ENV}={owners[-1]})"
        )
    return plugins


_lock = threading.Lock()
_cached: PluginSet | None = None


def get_plugins() -> PluginSet:
    """The process-wide plugin set, loaded on first use."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = load_plugins()
        return _cached


def reset_plugins() -> None:
    """Forget the loaded plugins (tests and long-lived processes that install plugins)."""
    global _cached
    with _lock:
        _cached = None
