"""Source trees: which files make a distribution, their hashes, and copies to build wheels from.

A tree hash is SHA-256 over the sorted relative paths and contents of the files that go
into the distribution (tests, caches and build output left out).

The core's hash covers what decides a cell's result. It leaves out the host-only parts
(``CORE_HOST_ONLY``: the CLI, benchmarks, the matrix itself, PufferTank, the testing kit,
the trainer, the torch helper) unless the cell's smoke run (``CELL_MODULE``) can import
them: its import statements are followed, deferred ones included, so whatever it reaches
is hashed wherever it lives. Of ``pyproject.toml`` it reads only the install-relevant
tables (dependencies, Python, build system, entry points, version). So a new CLI option, a
README edit or a new optional extra does not invalidate every cell, while any change to
what cells run (emulation, vector, plugins, adapters, the smoke run, …) does.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pathlib
import shutil
from collections.abc import Iterable
from typing import Any

from puffer_core.matrix.pyproject import read_pyproject

__all__ = [
    "CELL_MODULE",
    "cell_reachable",
    "copy_tree",
    "core_tree_hash",
    "hashed_core_files",
    "plugin_tree_hash",
    "tree_files",
]

#: What every cell runs (``python -m CELL_MODULE``); the matrix names it and never imports it.
CELL_MODULE = "puffer_core.testing.smoke"
#: Folder and file names never part of a source tree's hash or build copy.
SKIP_DIRS = {"__pycache__", "build", "dist", "tests", "test", ".nox", ".venv", "node_modules", ".git"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".so.tmp")
#: Core modules and packages a cell runs only when the smoke run imports them (see the module
#: docstring); anything not listed here, a new module included, is hashed.
CORE_HOST_ONLY = {"torch_helpers.py"}
CORE_HOST_ONLY_DIRS = {"bench", "cli", "matrix", "tank", "testing", "train"}
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
    return parts[1] in CORE_HOST_ONLY_DIRS


def _module_files(root: pathlib.Path, dotted: str) -> list[pathlib.Path]:
    """The files importing ``dotted`` runs: each package's ``__init__.py`` on the way, then the module."""
    parts = dotted.split(".")
    files = []
    for end in range(1, len(parts) + 1):
        base = pathlib.Path(*parts[:end])
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if (root / candidate).is_file():
                files.append(candidate)
                break
    return files


def _imported_names(rel: pathlib.Path, tree: ast.AST) -> list[str]:
    """Every module name an import statement of the file may load (``from a import b``: ``a`` and ``a.b``)."""
    package = list(rel.with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return [name for name in names if name == "puffer_core" or name.startswith("puffer_core.")]


def cell_reachable(root: pathlib.Path) -> set[pathlib.Path]:
    """The core's files the cell's smoke run can import, following its import statements (deferred ones too)."""
    todo = _module_files(root, CELL_MODULE)
    seen: set[pathlib.Path] = set()
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        tree = ast.parse((root / rel).read_text(encoding="utf-8"), filename=str(rel))
        for name in _imported_names(rel, tree):
            todo += _module_files(root, name)
    return seen


def hashed_core_files(root: pathlib.Path) -> list[pathlib.Path]:
    """The files of the core package its hash covers (see the module docstring)."""
    reachable = cell_reachable(root)
    return [rel for rel in _core_package_files(root) if not _host_only(rel) or rel in reachable]


def core_tree_hash(root: pathlib.Path) -> str:
    """Hash of what decides the core's behaviour inside a cell (see the module docstring)."""
    digest = hashlib.sha256(b"core-tree-v1\0")
    _hash_files(root, hashed_core_files(root), digest)
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
