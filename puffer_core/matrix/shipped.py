"""What the matrix verified, shipped inside puffer-core: the constraint sets and the cells' verdicts.

The matrix run writes, into ``puffer_core/matrix/verified/`` (package data, so a wheel carries it):

- ``constraints-py3.X.txt``: the common set of each Python (its joint cell passed), the file
  ``puffer constraints`` prints and the README's install command reads from the checkout;
- ``verified.json``: every cell's pins, resolved versions and outcome (with its reason), each
  plugin's distribution, package and known-bad rules, and each Python's common-set verdict,
  which ``puffer doctor`` compares an installation against.

Both are generated from ``compat_matrix/results.json``; nothing here runs a cell.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from packaging.utils import canonicalize_name

from puffer_core.matrix import common as common_mod
from puffer_core.matrix.model import DEFAULT_PYTHON, version_key
from puffer_core.matrix.store import MatrixError, atomic_write_text, common_sections

__all__ = [
    "SHIPPED_DIR",
    "VERIFIED_SCHEMA",
    "constraints_for",
    "load_verified",
    "running_python",
    "shipped_folder",
    "shipped_pythons",
    "verified_data",
    "write_shipped",
]

#: Where the shipped files live in the source tree and in an installed puffer-core.
SHIPPED_DIR = pathlib.Path(__file__).resolve().parent / "verified"
VERIFIED_SCHEMA = 1
_CONSTRAINTS_RE = re.compile(r"constraints-py(3\.\d+)\.txt\Z")
_USAGE = "# Use as a pip constraints file: pip install -c <(puffer constraints) -e plugins/nethack (in the checkout)\n"


def running_python() -> str:
    """This interpreter's X.Y: the Python whose set `puffer constraints` and `puffer doctor` take."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _constraints_name(python: str) -> str:
    return f"constraints-py{python}.txt"


def verified_data(results: Mapping[str, Any]) -> dict[str, Any]:
    """verified.json's content from results.json's (deterministic: sorted, no timestamps)."""
    plugins = {
        name: {
            "distribution": info.get("distribution"),
            "package": info.get("package"),
            "known_bad": info.get("known_bad") or [],
            "tank_only": bool(info.get("tank_only")),
        }
        for name, info in sorted((results.get("plugins") or {}).items())
        if info.get("package")
    }
    cells = [
        {
            "id": record["id"],
            "plugin": record["plugin"],
            "python": record["python"],
            "pins": record.get("pins") or {},
            "resolved": {k: v for k, v in (record.get("resolved") or {}).items() if k != "python"},
            "outcome": record["outcome"],
            "reason": record.get("error"),
        }
        for _, record in sorted((results.get("cells") or {}).items())
    ]
    commons = {}
    for section in _commons(results):
        joint = section.get("joint") or {}
        commons[section["python"]] = {
            "outcome": joint.get("outcome", "not run"),
            "members": {member["plugin"]: member.get("pins") or {} for member in section.get("members", [])},
            "dropped": section.get("dropped") or {},
            "pinned": _pinned(section) if joint.get("outcome") == "pass" else {},
        }
    return {
        "generated_by": "puffer_core.matrix.shipped from compat_matrix/results.json (nox -s compat); do not edit",
        "schema": VERIFIED_SCHEMA,
        "default_python": DEFAULT_PYTHON,
        "plugins": plugins,
        "cells": cells,
        "commons": dict(sorted(commons.items(), key=lambda kv: version_key(kv[0]))),
    }


def _pinned(section: Mapping[str, Any]) -> dict[str, str]:
    """Canonical name -> version of every line of the section's constraints file (what
    ``pip install -c <(puffer constraints) NAME`` can move)."""
    pinned = {}
    for line in common_mod.constraints_text(section).splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pinned[canonicalize_name(name.strip())] = version.strip()
    return dict(sorted(pinned.items()))


def _commons(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every Python's common section of results.json that names its Python, the default's first."""
    return [section for section in common_sections(results) if section.get("python")]


def shipped_folder(root: pathlib.Path, out: pathlib.Path) -> pathlib.Path | None:
    """Where a matrix run or render whose results folder is ``out`` writes the shipped data: the
    package's own ``matrix/verified/`` when ``out`` is the checkout's compat_matrix/, else nowhere
    (a scratch folder's results never ship)."""
    return root / "puffer_core" / "matrix" / "verified" if out == root / "compat_matrix" else None


def write_shipped(results: Mapping[str, Any], folder: pathlib.Path) -> list[pathlib.Path]:
    """Write verified.json and one constraints file per Python whose joint cell passed; the files
    of Pythons without one are removed (a set that no longer holds must not ship)."""
    written = []
    passing = {}
    for section in _commons(results):
        if (section.get("joint") or {}).get("outcome") == "pass" and section.get("members"):
            passing[_constraints_name(section["python"])] = common_mod.constraints_text(section, usage=_USAGE)
    for name, text in passing.items():
        atomic_write_text(folder / name, text)
        written.append(folder / name)
    for stale in folder.glob("constraints-py*.txt"):
        if stale.name not in passing:
            stale.unlink()
    path = folder / "verified.json"
    atomic_write_text(path, json.dumps(verified_data(results), indent=1, sort_keys=False) + "\n")
    return [*written, path]


def shipped_pythons(folder: pathlib.Path = SHIPPED_DIR) -> list[str]:
    """The Pythons a constraint set ships for, oldest first."""
    found = [m.group(1) for p in folder.glob("constraints-py*.txt") if (m := _CONSTRAINTS_RE.match(p.name))]
    return sorted(found, key=version_key)


def load_verified(folder: pathlib.Path = SHIPPED_DIR) -> dict[str, Any]:
    """verified.json, or MatrixError when this installation lacks it or it is damaged."""
    path = folder / "verified.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MatrixError(f"{path} is missing: this puffer-core was installed without the matrix's data") from None
    except (OSError, ValueError) as exc:
        raise MatrixError(f"{path} cannot be read ({exc}): reinstall puffer-core") from None
    if not isinstance(data, dict) or data.get("schema") != VERIFIED_SCHEMA:
        raise MatrixError(f"{path} is not a schema-{VERIFIED_SCHEMA} verified.json: reinstall puffer-core")
    return data


def constraints_for(
    python: str, plugins: Iterable[str] = (), folder: pathlib.Path = SHIPPED_DIR, verified: Mapping | None = None
) -> str:
    """The constraint set verified on ``python``; with ``plugins``, without the other plugins'
    environment packages and distributions (their companions stay: a constraint on a package
    nobody installs changes nothing)."""
    shipped = shipped_pythons(folder)
    path = folder / _constraints_name(python)
    if python not in shipped:
        raise MatrixError(
            f"no constraint set for Python {python}: the matrix verified one for {', '.join(shipped) or 'none'}"
        )
    text = path.read_text(encoding="utf-8")
    plugins = list(plugins)
    if not plugins:
        return text
    verified = verified if verified is not None else load_verified(folder)
    known = verified.get("plugins") or {}
    unknown = [name for name in plugins if name not in known]
    if unknown:
        raise MatrixError(f"no plugin named {', '.join(map(repr, unknown))} in the matrix; it has {', '.join(known)}")
    section = (verified.get("commons") or {}).get(python) or {}
    missing = [name for name in plugins if name not in section.get("members", [])]
    if missing:
        reasons = "; ".join(f"{name}: {section.get('dropped', {}).get(name, 'not in the set')}" for name in missing)
        raise MatrixError(f"not in the common set on Python {python}: {reasons}")
    # A package a chosen plugin pins stays even when it is another plugin's (classic's gymnasium).
    pinned = {canonicalize_name(name) for plugin in plugins for name in section["members"][plugin]}
    others = {
        canonicalize_name(name)
        for plugin, info in known.items()
        if plugin not in plugins
        for name in (info.get("package"), info.get("distribution"))
        if name and canonicalize_name(name) not in pinned
    }
    kept = [line for line in text.splitlines(keepends=True) if _requirement_name(line) not in others]
    return "".join(kept)


def _requirement_name(line: str) -> str | None:
    if line.startswith("#") or "==" not in line:
        return None
    return canonicalize_name(line.split("==", 1)[0].strip())
