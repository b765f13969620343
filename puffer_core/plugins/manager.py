"""The plugin manager: discovers plugins, loads each in isolation, validates, indexes envs.

Built-in plugins (the ``classic`` environments, the compatibility adapters) are loaded
through the same path as entry points of the ``puffer`` group, so everything here applies
to them too. A plugin that fails to import, registers an unknown hook or returns a bad
value is marked ``failed`` with its cause and unregistered; the others keep working.

Each plugin's hooks are called one plugin at a time, and anything a plugin raises is
caught but ``KeyboardInterrupt`` (Ctrl-C is the user's): ``SystemExit`` and
``GeneratorExit`` too, which can only come from the plugin's own code there. When
``make`` calls ``puffer_adapt`` / ``puffer_wrappers`` for one env, a plugin whose hook
raises for *its own* env makes that env's error (naming the plugin and the hook); one that
raises for *another plugin's* env is marked failed as above (a warning says so once) and
skipped, so one broken plugin cannot break ``classic/cartpole``. ``puffer plugins`` calls
these two hooks of each plugin once as ``make`` would (``check_make_hooks``), so one that
raises is listed as failed before any env is made. The built-in plugins are
Puffer Core's own code: what one raises is the env's error, as it is. This isolates
mistakes, not malice: a plugin is code you installed, and runs with your rights.
"""

from __future__ import annotations

import difflib
import importlib.metadata as metadata
import os
import threading
import traceback
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from puffer_core.errors import PluginError, PufferError, UnknownEnvError
from puffer_core.plugins.builtin import adapters, classic
from puffer_core.plugins.gymnasium_ids import gymnasium_spec, note_once
from puffer_core.specs import hooks
from puffer_core.specs.compat import CompatAxes
from puffer_core.specs.declarations import ENV_ID_RE, DockerLayer, EnvSpec, plugin_name_problem

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
#: The env whose raw env ``check_make_hooks`` hands each plugin's ``puffer_adapt``: built in,
#: quick to make, and what a plugin meets first in ``make`` (``puffer run classic/cartpole``).
PROBE_ENV = "classic/cartpole"

#: Built-in plugins: name -> the module or class that holds their hooks (imported, not named
#: by strings: the layer test and import-linter see these dependencies).
BUILTIN_PLUGINS: dict[str, Any] = {
    "classic": classic,
    "gym": adapters.GymAdapter,
    "pettingzoo-legacy": adapters.LegacyPettingZooAdapter,
}

# Status values shown by `puffer plugins`.
LOADED, FAILED, DISABLED, NOT_SELECTED = "loaded", "failed", "disabled", "not selected"

#: The plugins this project publishes (its plugins/ folder), plugin name -> distribution: the
#: only names an install hint may suggest. A hint built from an id (one read from a file, or
#: a typo) would point at a name anyone can register on the package index.
PUBLISHED_PLUGINS: dict[str, str] = {
    name: f"puffer-plugin-{name}" for name in ("atari", "dmlab", "nethack", "pettingzoo")
}


def _plugin_install(plugin: str) -> str:
    """How to install one of this project's plugins: from the checkout or a built wheel (no index serves them yet)."""
    return (
        f"install it from the checkout: pip install -e plugins/{plugin}, or a wheel built by nox -s dist: "
        f"pip install {PUBLISHED_PLUGINS[plugin]} --find-links DIST; see docs/installation.md"
    )


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


def _called(name: str, impl: Any, hook_name: str) -> Any:
    """What plugin ``name``'s implementation of ``hook_name`` returns (None without one); anything
    it raises but KeyboardInterrupt (SystemExit included) becomes that plugin's PluginError."""
    if impl is None:
        return None
    try:
        return impl.function()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise PluginError(f"plugin '{name}': {hook_name}() raised {_short_error(exc)}", plugin=name) from exc


def _target_of(plugin: Any) -> str:
    """What ``puffer plugins`` shows as a built-in's target: ``module`` or ``module:Class``."""
    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    return f"{plugin.__module__}:{plugin.__qualname__}"


def _split_names(value: str | None) -> list[str]:
    if value is None:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


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
    detail = str(exc).strip()
    return f"{type(exc).__name__}: {detail}".splitlines()[0] if detail else type(exc).__name__


#: Held while a plugin that raised in ``make`` is marked failed (envs may be made in threads).
_lock_failing = threading.Lock()


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
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # a plugin calling sys.exit() must not end us (see the module docstring)
                raise PluginError(
                    f"plugin '{cand.name}' failed to import ({cand.target}): {_short_error(exc)}",
                    plugin=cand.name,
                ) from exc
            self._register(cand.name, obj, info)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            error = str(exc) if isinstance(exc, PluginError) else f"plugin '{cand.name}': {_short_error(exc)}"
            self._mark_failed(cand.name, error, exc)

    def _mark_failed(self, name: str, error: str, exc: BaseException) -> None:
        """Plugin ``name`` failed (``error``): unregistered, its envs, layer and axes gone."""
        info = self.plugins[name]
        info.status, info.error = FAILED, error
        info.traceback = "".join(traceback.format_exception(exc))
        for env_id in info.envs:
            if self.env_owner.get(env_id) == name and env_id not in self.duplicates:
                del self.env_owner[env_id], self.env_specs[env_id]
        info.envs, info.hooks = [], []
        self.docker_layers.pop(name, None)
        self.compat_axes.pop(name, None)
        if self.pm.get_plugin(name) is not None:
            self.pm.unregister(name=name)

    def _register(self, name: str, obj: Any, info: PluginInfo) -> None:
        if isinstance(obj, type):  # an entry point may name a plugin class; hooks live on an instance
            try:
                obj = obj()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
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
        result = _called(name, impl, "puffer_envs")
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
        result = _called(name, impl, hook_name)
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
        aliased = self.alias_of(env_id)
        if aliased is not None:
            note_once(f"{env_id} is {aliased.id} ({self.env_owner.get(aliased.id, aliased.plugin)}'s env, with its "
                       "wrappers and defaults)")  # fmt: skip
            return aliased
        spec = gymnasium_spec(env_id)
        if spec is not None:
            return spec
        raise UnknownEnvError(self._unknown_message(env_id))

    def alias_of(self, env_id: str) -> EnvSpec | None:
        """The plugin env that declares ``env_id`` (a gymnasium id) as its alias, or None (the first loaded wins)."""
        return next((spec for spec in self.env_specs.values() if env_id in spec.aliases), None)

    def knows(self, env_id: str) -> bool:
        """Whether ``env_id`` names an env here: a plugin's, an alias, or an id gymnasium registers."""
        try:
            self.get_spec(env_id)
        except (UnknownEnvError, PluginError):
            return False
        return True

    def _unknown_message(self, env_id: str) -> str:
        plugin = env_id.split("/", 1)[0] if ENV_ID_RE.match(env_id) else None  # not gymnasium's ALE/...
        lines = [f"unknown environment {env_id!r}."]
        if plugin is not None and plugin in self.plugins and self.plugins[plugin].status != LOADED:
            info = self.plugins[plugin]
            cause = str(info.error).rstrip().removesuffix(".")
            lines.append(f"Its plugin {plugin!r} did not load ({info.status}): {cause}.")
        elif plugin is not None and plugin not in self.plugins:
            hint = f" ({_plugin_install(plugin)})" if plugin in PUBLISHED_PLUGINS else ""
            lines.append(f"No plugin named {plugin!r} is installed{hint}.")
        names = {spec_id.split("/", 1)[1]: spec_id for spec_id in self.env_specs}
        # A gymnasium id written another way (cartpole-v1) is the plugin env that has it as an alias.
        aliases = {alias.lower(): spec.id for spec in self.env_specs.values() for alias in spec.aliases}
        close = [aliases[a] for a in difflib.get_close_matches(env_id.lower(), list(aliases), n=3, cutoff=0.8)]
        close += difflib.get_close_matches(env_id, list(self.env_specs), n=3, cutoff=0.8)
        if "/" not in env_id:
            close += [names[n] for n in difflib.get_close_matches(env_id.lower(), list(names), n=3, cutoff=0.6)]
        close = list(dict.fromkeys(close))
        if close:
            lines.append("Did you mean: " + ", ".join(close) + "?")
        lines.append("Run `puffer envs` to list every environment (--gymnasium: gymnasium's other ids).")
        return " ".join(lines)

    # -- hook calls used by make() ------------------------------------------------------

    def adapt(self, env: Any, spec: EnvSpec) -> Any:
        """The first non-None ``puffer_adapt`` result in pluggy's call order, or None; each
        plugin's hook called on its own (``_call_one``)."""
        for name, caller in self._callers("puffer_adapt"):
            result = self._call_one(name, caller, spec, env=env)
            if result is not None:
                return result
        return None

    def wrappers(self, spec: EnvSpec) -> list[Callable[[Any], Any]]:
        """Wrappers for ``spec`` in plugin registration order, each plugin's in its own order."""
        found: list[Callable[[Any], Any]] = []
        # pluggy calls the last-registered plugin first; reverse to registration order.
        for name, caller in reversed(self._callers("puffer_wrappers")):
            found += _wrapper_list(name, spec, self._call_one(name, caller, spec))
        return found

    def check_make_hooks(self) -> None:
        """Call each installed plugin's hooks that ``make`` calls as it would: ``puffer_wrappers``
        for every env, ``puffer_adapt`` for the raw env of ``PROBE_ENV``. A plugin whose hook
        raises or returns what ``make`` refuses is marked failed, with the hook, the env and the
        cause (``puffer plugins`` shows it): ``make`` calls these hooks only as it builds an env,
        so a broken one would look loaded until then. An ImportError for one of the plugin's own
        envs is that env's missing package (``puffer envs`` says so), not the plugin's failure.
        Built-in plugins, Puffer Core's own code, are not called."""
        specs = list(self.env_specs.values())
        for name, caller in self._callers("puffer_wrappers"):
            if self.plugins[name].source == "builtin":
                continue
            for spec in specs:
                if not self._probe(name, caller, spec):
                    break  # failed: one cause is enough
        probe = self.env_specs.get(PROBE_ENV)
        adapters = [(n, c) for n, c in self._callers("puffer_adapt") if self.plugins[n].source != "builtin"]
        if probe is None or not adapters:
            return
        try:
            raw = probe.creator(**probe.kwargs)
        except Exception:  # nothing to probe with (gymnasium broken): `puffer envs` says so
            return
        try:
            for name, caller in adapters:
                self._probe(name, caller, probe, env=raw)
        finally:
            raw.close()

    def _probe(self, name: str, caller: Any, spec: EnvSpec, **kwargs: Any) -> bool:
        """Plugin ``name``'s part of a make hook for ``spec``; False (and the plugin marked failed)
        when it raised or returned what ``make`` refuses."""
        own = self.env_owner.get(spec.id) == name
        try:
            result = caller(spec=spec, **kwargs)
            if caller.name == "puffer_wrappers":
                _wrapper_list(name, spec, result)
            return True
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit included: see the module docstring
            if own and isinstance(exc, ImportError):
                return True  # its own env's missing package: `puffer envs` says so
            if isinstance(exc, PluginError) and exc.plugin == name:  # a result make refuses, named already
                error = f"{exc}; make calls {caller.name}() for every env it builds"
            else:
                whose = "its own env" if own else "another plugin's env"
                error = (
                    f"plugin '{name}': {caller.name}() raised {_short_error(exc)} for {spec.id!r} ({whose}); make "
                    f"calls it for every env it builds: fix or update the plugin, or disable it ({DISABLE_ENV}={name})"
                )
            self._mark_failed(name, error, exc)
            return False

    def _callers(self, hook_name: str) -> list[tuple[str, Any]]:
        """(plugin, a caller of that plugin's part of ``hook_name`` alone), in pluggy's call order."""
        impls = reversed(getattr(self.pm.hook, hook_name).get_hookimpls())
        callers = []
        for name in dict.fromkeys(impl.plugin_name for impl in impls):
            plugin = self.pm.get_plugin(name)
            others = [other for other in self.pm.get_plugins() if other is not plugin]
            callers.append((name, self.pm.subset_hook_caller(hook_name, remove_plugins=others)))
        return callers

    def _call_one(self, name: str, caller: Any, spec: EnvSpec, **kwargs: Any) -> Any:
        """Plugin ``name``'s part of a hook ``make`` calls for ``spec``; None when it raised for
        another plugin's env (it is marked failed: see the module docstring)."""
        try:
            return caller(spec=spec, **kwargs)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            info = self.plugins.get(name)
            own = self.env_owner.get(spec.id) == name
            if info is None or (own and isinstance(exc, PufferError)):
                raise  # the plugin's own error about its own env, as it meant it
            if info.source == "builtin":
                raise  # Puffer Core's own code: the env's error (a missing shimmy, a broken env)
            hook_name = caller.name
            if own:
                raise PluginError(
                    f"{spec.id}: its plugin '{name}' raised {_short_error(exc)} in {hook_name}(); "
                    f"fix or update the plugin, or disable it ({DISABLE_ENV}={name})",
                    plugin=name,
                    field=hook_name,
                ) from exc
            error = (
                f"plugin '{name}': {hook_name}() raised {_short_error(exc)} for {spec.id!r}, another plugin's "
                f"env; it is skipped from now on (fix or update it, or disable it: {DISABLE_ENV}={name})"
            )
            with _lock_failing:
                if info.status == LOADED:
                    self._mark_failed(name, error, exc)
                    warnings.warn(error, RuntimeWarning, stacklevel=4)
            return None


def _wrapper_list(name: str, spec: EnvSpec, results: Any) -> list[Callable[[Any], Any]]:
    """The wrappers in ``results`` (what plugin ``name``'s ``puffer_wrappers`` implementations
    returned for ``spec``: None, a callable or a list of callables each).

    Raises:
        PluginError: a result that is not callable (naming the plugin and the env).
    """
    found = []
    for result in results or []:
        if result is None:
            continue
        for wrapper in result if isinstance(result, (list, tuple)) else [result]:
            if not callable(wrapper):
                raise PluginError(
                    f"plugin '{name}': a puffer_wrappers() result for {spec.id!r} is {wrapper!r}, "
                    "which is not callable",
                    plugin=name,
                    field="puffer_wrappers",
                )
            found.append(wrapper)
    return found


def load_plugins(
    entry_points: Iterable[metadata.EntryPoint] | None = None,
    builtins: Mapping[str, Any] | None = None,
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
        _Candidate(name, "builtin", _target_of(plugin), (lambda p=plugin: p)) for name, plugin in builtins.items()
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
