"""Where the matrix's inputs come from: the plugins' source trees and the core's, and their hashes.

Plugins are read from ``plugins/<name>/`` (their ``pyproject.toml`` entry points) and
imported from source, so the runner needs neither the plugins nor their environment
packages installed. Built-in plugins (``classic``) come with the core.

Hashing: a tree hash is SHA-256 over the sorted relative paths and contents of the files
that go into the distribution (tests, caches and build output left out). The core's hash
leaves out what a cell never imports: the matrix machinery except ``smoke.py`` and the
package ``__init__``, and the CLI, benchmark, PufferTank, authoring-kit, test-isolation and torch-helper
modules (``CORE_HOST_ONLY``); and it reads only the install-relevant tables of
``pyproject.toml`` (dependencies, Python, build system, entry points, version). So a new
CLI option, a README edit or a new optional extra does not invalidate every cell, while
any change to what cells run (emulation, vector, plugins, adapters, …) does.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import json
import os
import pathlib
import re
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from puffer_core.plugins import BUILTIN_PLUGINS, FAILED, load_plugins
from puffer_core.specs import CompatAxes

__all__ = [
    "PluginSource",
    "copy_tree",
    "core_tree_hash",
    "discover",
    "plugin_tree_hash",
    "read_pyproject",
    "tree_files",
]

#: Folder and file names never part of a source tree's hash or build copy.
SKIP_DIRS = {"__pycache__", "build", "dist", "tests", "test", ".nox", ".venv", "node_modules", ".git"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".so.tmp")
#: Matrix modules that never run inside a cell: changing them does not change a cell's result.
MATRIX_HOST_ONLY = {
    "model.py",
    "runner.py",
    "environment.py",
    "store.py",
    "render.py",
    "common.py",
    "cli.py",
    "sources.py",
    "__main__.py",
}
#: Core modules and packages a cell's smoke run never imports (the CLI, benchmarks, PufferTank,
#: the testing kit, the torch helper, the trainer): editing them does not invalidate the
#: matrix. Anything not listed here, a new module included, is hashed.
CORE_HOST_ONLY = {"torch_helpers.py"}
CORE_HOST_ONLY_DIRS = {"bench", "cli", "tank", "testing", "train"}
#: Top-level files of the core that go into its distribution.
CORE_TOP_FILES = ("pyproject.toml", "README.md", "README.rst", "LICENSE", "LICENSE.txt", "MANIFEST.in", "setup.cfg")


def _skip_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".") or name.endswith(".egg-info")


def tree_files(root: pathlib.Path) -> list[pathlib.Path]:
    """Files of a source tree (relative paths, sorted), without tests, caches and build output."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _skip_dir(d))
        for name in filenames:
            if name.endswith(SKIP_SUFFIXES) or name.startswith("."):
                continue
            found.append((pathlib.Path(dirpath) / name).relative_to(root))
    return sorted(found)


def _hash_files(root: pathlib.Path, files: Iterable[pathlib.Path], digest: Any) -> None:
    for rel in files:
        digest.update(rel.as_posix().encode() + b"\0")
        try:
            digest.update((root / rel).read_bytes())
        except OSError:  # vanished while we walked (an editor's temp file)
            digest.update(b"<missing>")
        digest.update(b"\0")


def plugin_tree_hash(path: pathlib.Path) -> str:
    digest = hashlib.sha256(b"plugin-tree-v1\0")
    _hash_files(path, tree_files(path), digest)
    return digest.hexdigest()[:16]


def _core_package_files(root: pathlib.Path) -> list[pathlib.Path]:
    return [pathlib.Path("puffer_core") / rel for rel in tree_files(root / "puffer_core")]


def _host_only(rel: pathlib.Path) -> bool:
    parts = rel.parts  # ("puffer_core", ...)
    if len(parts) == 2:
        return parts[1] in CORE_HOST_ONLY
    if parts[1] in CORE_HOST_ONLY_DIRS:
        return True
    return len(parts) == 3 and parts[1] == "matrix" and parts[2] in MATRIX_HOST_ONLY


def core_tree_hash(root: pathlib.Path) -> str:
    """Hash of what decides the core's behaviour inside a cell (see the module docstring)."""
    digest = hashlib.sha256(b"core-tree-v1\0")
    files = [rel for rel in _core_package_files(root) if not _host_only(rel)]
    _hash_files(root, files, digest)
    project = read_pyproject(root / "pyproject.toml")
    relevant = {
        "build-system": project.get("build-system"),
        "dependencies": project.get("project", {}).get("dependencies"),
        "requires-python": project.get("project", {}).get("requires-python"),
        "entry-points": project.get("project", {}).get("entry-points"),
        "scripts": project.get("project", {}).get("scripts"),
        "version": project.get("project", {}).get("version"),
    }
    digest.update(json.dumps(relevant, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def copy_tree(src: pathlib.Path, dest: pathlib.Path, core: bool = False) -> None:
    """Copy the files of a source tree (as hashed) to ``dest``, to build a wheel there.

    Building from a copy keeps ``build/`` and ``*.egg-info`` out of the working tree and
    lets cells run while someone edits the source.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if core:
        files = [pathlib.Path(name) for name in CORE_TOP_FILES if (src / name).is_file()]
        files += _core_package_files(src)
    else:
        files = tree_files(src)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)


# -- pyproject --------------------------------------------------------------------------


def read_pyproject(path: pathlib.Path) -> dict[str, Any]:
    """Parse a pyproject.toml (tomllib, tomli, or a small fallback for the tables we read)."""
    text = path.read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            return _tiny_toml(text)
    return tomllib.loads(text)


def _tiny_toml(text: str) -> dict[str, Any]:
    """Just enough TOML for ``[project]`` name/version and string-valued tables (Python 3.10 without tomli)."""
    data: dict[str, Any] = {}
    table: dict[str, Any] = data
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.strip().startswith('"') else raw.strip()
        header = re.match(r"^\[([^\[\]]+)\]$", line)
        if header:
            table = data
            for part in header.group(1).split("."):
                table = table.setdefault(part.strip().strip('"'), {})
            continue
        pair = re.match(r'^("?[\w.-]+"?)\s*=\s*"([^"]*)"$', line)
        if pair:
            table[pair.group(1).strip('"')] = pair.group(2)
    return data


# -- plugins ----------------------------------------------------------------------------


@dataclass
class PluginSource:
    """One plugin the matrix knows: its axes, its envs and where its source lives."""

    name: str
    axes: CompatAxes | None
    path: pathlib.Path | None  # None for built-in plugins
    distribution: str | None = None
    version: str | None = None
    envs: list[str] = field(default_factory=list)
    error: str | None = None  # why it could not be loaded

    @property
    def builtin(self) -> bool:
        return self.path is None

    def tree_hash(self) -> str:
        return "builtin" if self.path is None else plugin_tree_hash(self.path)


def _import_root(plugin_dir: pathlib.Path) -> pathlib.Path:
    return plugin_dir / "src" if (plugin_dir / "src").is_dir() else plugin_dir


def _entry_points(plugin_dir: pathlib.Path) -> tuple[list[metadata.EntryPoint], str | None, str | None]:
    project = read_pyproject(plugin_dir / "pyproject.toml").get("project", {})
    group = project.get("entry-points", {}).get("puffer", {})
    eps = [metadata.EntryPoint(name=name, value=value, group="puffer") for name, value in group.items()]
    return eps, project.get("name"), project.get("version")


def discover(plugins_dir: pathlib.Path | None, include_builtins: bool = True) -> dict[str, PluginSource]:
    """Every plugin under ``plugins_dir`` (and the built-ins) that declares ``CompatAxes``.

    Plugins are imported from their source folders through the core's own plugin manager,
    so validation and error reporting are exactly those of ``puffer plugins``.
    """
    eps: list[metadata.EntryPoint] = []
    owner: dict[str, tuple[pathlib.Path, str | None, str | None]] = {}
    problems: dict[str, tuple[pathlib.Path, str]] = {}
    if plugins_dir is not None and plugins_dir.is_dir():
        for plugin_dir in sorted(p for p in plugins_dir.iterdir() if (p / "pyproject.toml").is_file()):
            try:
                found, dist, version = _entry_points(plugin_dir)
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
                owner[ep.name] = (plugin_dir.resolve(), dist, version)
    builtins = BUILTIN_PLUGINS if include_builtins else {}
    plugin_set = load_plugins(entry_points=eps, builtins=builtins, environ={})
    sources: dict[str, PluginSource] = {}
    for name, info in plugin_set.plugins.items():
        path, dist, version = owner.get(name, (None, None, None))
        if info.status == FAILED:
            if path is not None:  # a built-in that fails is the core's problem, not a matrix row
                sources[name] = PluginSource(name, None, path, dist, version, error=info.error)
            continue
        axes = plugin_set.compat_axes.get(name)
        if axes is None:
            continue  # adapters and plugins without axes have no cells
        sources[name] = PluginSource(name, axes, path, dist, version, envs=list(info.envs))
    for name, (path, problem) in problems.items():
        sources.setdefault(name, PluginSource(name, None, path, error=problem))
    return dict(sorted(sources.items()))
