"""The plugins the matrix knows, read from their source folders with their compatibility axes.

Plugins are read from ``plugins/<name>/`` (their ``pyproject.toml`` entry points) and
imported from source, so the runner needs neither the plugins nor their environment
packages installed. Built-in plugins (``classic``) come with the core. Source trees and
their hashes: :mod:`puffer_core.matrix.trees`.
"""

from __future__ import annotations

import importlib.metadata as metadata
import pathlib
import sys
from dataclasses import dataclass, field

from puffer_core.matrix.pyproject import read_pyproject
from puffer_core.matrix.trees import plugin_tree_hash
from puffer_core.plugins import BUILTIN_PLUGINS, FAILED, load_plugins
from puffer_core.specs.compat import CompatAxes

__all__ = ["PluginSource", "discover"]


@dataclass
class PluginSource:
    """One plugin the matrix knows: its axes, its envs and where its source lives."""

    name: str
    axes: CompatAxes | None
    path: pathlib.Path | None  # None for built-in plugins
    distribution: str | None = None
    envs: list[str] = field(default_factory=list)
    error: str | None = None  # why it could not be loaded

    @property
    def builtin(self) -> bool:
        return self.path is None

    def tree_hash(self) -> str:
        return "builtin" if self.path is None else plugin_tree_hash(self.path)


def _import_root(plugin_dir: pathlib.Path) -> pathlib.Path:
    return plugin_dir / "src" if (plugin_dir / "src").is_dir() else plugin_dir


def _entry_points(plugin_dir: pathlib.Path) -> tuple[list[metadata.EntryPoint], str | None]:
    project = read_pyproject(plugin_dir / "pyproject.toml").get("project", {})
    group = project.get("entry-points", {}).get("puffer", {})
    eps = [metadata.EntryPoint(name=name, value=value, group="puffer") for name, value in group.items()]
    return eps, project.get("name")


def discover(plugins_dir: pathlib.Path | None, include_builtins: bool = True) -> dict[str, PluginSource]:
    """Every plugin under ``plugins_dir`` (and the built-ins) that declares ``CompatAxes``.

    Plugins are imported from their source folders through the core's own plugin manager,
    so validation and error reporting are exactly those of ``puffer plugins``.
    """
    eps: list[metadata.EntryPoint] = []
    owner: dict[str, tuple[pathlib.Path, str | None]] = {}
    problems: dict[str, tuple[pathlib.Path, str]] = {}
    if plugins_dir is not None and plugins_dir.is_dir():
        for plugin_dir in sorted(p for p in plugins_dir.iterdir() if (p / "pyproject.toml").is_file()):
            try:
                found, dist = _entry_points(plugin_dir)
            except Exception as exc:  # a broken pyproject is that plugin's problem only
                problems[plugin_dir.name] = (plugin_dir, f"cannot read pyproject.toml: {exc}")
                continue
            if not found:
                problems[plugin_dir.name] = (plugin_dir, "declares no [project.entry-points.puffer] entry")
            root = str(_import_root(plugin_dir).resolve())
            if root not in sys.path:
                sys.path.insert(0, root)
            for ep in found:
                eps.append(ep)
                owner[ep.name] = (plugin_dir.resolve(), dist)
    builtins = BUILTIN_PLUGINS if include_builtins else {}
    plugin_set = load_plugins(entry_points=eps, builtins=builtins, environ={})
    sources: dict[str, PluginSource] = {}
    for name, info in plugin_set.plugins.items():
        path, dist = owner.get(name, (None, None))
        if info.status == FAILED:
            if path is not None:  # a built-in that fails is the core's problem, not a matrix row
                sources[name] = PluginSource(name, None, path, dist, error=info.error)
            continue
        axes = plugin_set.compat_axes.get(name)
        if axes is None:
            continue  # adapters and plugins without axes have no cells
        sources[name] = PluginSource(name, axes, path, dist, envs=list(info.envs))
    for name, (path, problem) in problems.items():
        sources.setdefault(name, PluginSource(name, None, path, error=problem))
    return dict(sorted(sources.items()))
