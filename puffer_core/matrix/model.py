"""The cells of the compatibility matrix, computed from the plugins' ``CompatAxes``.

A cell is one (plugin, Python, pin set): the plugin's environment package at one of its
versions, the companion pins that version fixes (``CompatAxes.pins``), one value of each
extra axis (``CompatAxes.axes``) and the ``extras`` installed everywhere. A cell that a
``KnownBad`` entry matches is kept, with ``excluded`` set to the reason, so the tables show
it instead of silently dropping it. A tank-only plugin's cell (``tank``) is its package as a
built PufferTank image holds it (:mod:`~puffer_core.matrix.tank_cells`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from puffer_core.specs.compat import CompatAxes

__all__ = [
    "DEFAULT_PYTHON",
    "OUTCOMES",
    "Cell",
    "cells_for",
    "known_bad_reason",
    "newest_cell",
    "row_cells",
    "select_cells",
    "version_key",
    "when_matches",
]

#: The Python of ``--quick`` cells and of the joint ``common`` cell.
DEFAULT_PYTHON = "3.11"

#: Every outcome a cell can have, in the order the legend lists them.
OUTCOMES = (
    "pass",
    "install-failed",
    "import-failed",
    "smoke-failed",
    "timeout",
    "interpreter-missing",
    "tank-missing",
    "excluded",
)

_SLUG_RE = re.compile(r"[^A-Za-z0-9._-]+")


def version_key(version: str) -> Any:
    """Sort key for version strings; unparsable versions sort first, by text."""
    try:
        return (1, Version(version), "")
    except (InvalidVersion, TypeError):
        return (0, Version("0"), str(version))


def _slug(text: str) -> str:
    return _SLUG_RE.sub("_", text)


@dataclass(frozen=True)
class Cell:
    """One virtual environment of the matrix."""

    plugin: str
    python: str
    package: str  # the plugin's environment package (the row of its table)
    version: str  # its version in this cell
    companions: tuple[tuple[str, str], ...] = ()  # fixed pins of this version, sorted
    axes: tuple[tuple[str, str], ...] = ()  # one value per extra axis, in declared order
    extras: tuple[str, ...] = ()
    excluded: str | None = None  # the KnownBad reason, when excluded
    tank: bool = False  # runs inside a PufferTank image (CompatAxes.tank_only), not in a venv

    @property
    def id(self) -> str:
        """File-name-safe and unique: ``nethack-nle1.2.0-py3.12`` (+ ``-six1.16.0`` per axis)."""
        parts = [self.plugin, f"{self.package}{self.version}"]
        parts += [f"{name}{value}" for name, value in self.axes]
        parts.append(f"py{self.python}")
        return _slug("-".join(parts))

    @property
    def row(self) -> str:
        """The table row this cell sits in (everything but Python)."""
        return "-".join([f"{self.package}{self.version}", *(f"{n}{v}" for n, v in self.axes)])

    @property
    def pins(self) -> dict[str, str]:
        """Every pinned package of the cell: the env package, its companions, the axis values."""
        pins = {self.package: self.version}
        pins.update(self.companions)
        pins.update(self.axes)
        return pins

    def requirements(self) -> list[str]:
        """What ``uv pip install`` gets besides puffer-core and the plugin itself."""
        return [f"{name}=={version}" for name, version in self.pins.items()] + list(self.extras)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "plugin": self.plugin,
            "python": self.python,
            "package": self.package,
            "version": self.version,
            "companions": dict(self.companions),
            "axes": dict(self.axes),
            "pins": self.pins,
            "extras": list(self.extras),
            "row": self.row,
            # Only when set: every other cell's JSON, and so its input hash, stays as it was.
            **({"tank": True} if self.tank else {}),
        }


def when_matches(when: Mapping[str, str], values: Mapping[str, str]) -> bool:
    """Whether a ``KnownBad.when`` holds for ``values`` (canonical package name, and ``"python"``,
    → version): every name present and within its specifier. Like ``KnownBad.matches`` with
    package names compared canonically (``Gymnasium`` = ``gymnasium``)."""
    for name, spec in when.items():
        key = "python" if name.lower() == "python" else canonicalize_name(name)
        version = values.get(key)
        if version is None:
            return False
        try:
            if not SpecifierSet(spec).contains(Version(version), prereleases=True):
                return False
        except (InvalidSpecifier, InvalidVersion):
            return False
    return True


def known_bad_reason(axes: CompatAxes, python: str, pins: Mapping[str, str]) -> str | None:
    """The reason of the first ``known_bad`` entry matching this Python and pin set."""
    values = {canonicalize_name(name): version for name, version in pins.items()}
    values["python"] = python
    for bad in axes.known_bad:
        if when_matches(bad.when, values):
            return bad.reason
    return None


def cells_for(plugin: str, axes: CompatAxes) -> list[Cell]:
    """Every cell of one plugin: versions × extra axes × Python, excluded ones marked.

    A companion pin of a version wins over an extra axis naming the same package (that
    version fixes it), so such an axis does not multiply that version's cells.
    """
    cells: list[Cell] = []
    for version in axes.versions:
        companions = dict(axes.pins.get(version, {}))
        fixed = {canonicalize_name(name) for name in companions} | {canonicalize_name(axes.package)}
        free_axes = [
            (name, tuple(values)) for name, values in axes.axes.items() if canonicalize_name(name) not in fixed
        ]
        combos = itertools.product(*(values for _, values in free_axes)) if free_axes else [()]
        for combo in combos:
            axis_values = tuple((name, value) for (name, _), value in zip(free_axes, combo))
            cells += row_cells(plugin, axes, version, companions, axis_values)
    return cells


def row_cells(
    plugin: str, axes: CompatAxes, version: str, companions: Mapping[str, str], axis_values: tuple[tuple[str, str], ...]
) -> list[Cell]:
    """One row's cells: ``version`` with these companions and axis values, on each Python of ``axes``."""
    cells = []
    for python in axes.python:
        pins = {axes.package: version, **companions, **dict(axis_values)}
        cells.append(
            Cell(
                plugin=plugin,
                python=python,
                package=axes.package,
                version=version,
                companions=tuple(sorted(companions.items())),
                axes=axis_values,
                extras=tuple(axes.extras),
                excluded=known_bad_reason(axes, python, pins),
                tank=axes.tank_only,
            )
        )
    return cells


def newest_cell(cells: Iterable[Cell], python: str = DEFAULT_PYTHON) -> Cell | None:
    """The newest non-excluded cell on ``python`` (else on the newest Python the plugin lists)."""
    candidates = [c for c in cells if c.excluded is None]
    if not candidates:
        return None
    on_python = [c for c in candidates if c.python == python]
    if not on_python:
        newest_py = max((c.python for c in candidates), key=version_key)
        on_python = [c for c in candidates if c.python == newest_py]
    return max(on_python, key=lambda c: (version_key(c.version), [version_key(v) for _, v in c.axes]))


def select_cells(
    cells: Iterable[Cell],
    pythons: Iterable[str] = (),
    quick: bool = False,
    default_python: str = DEFAULT_PYTHON,
) -> list[Cell]:
    """Filter one plugin's cells by ``--python`` and ``--quick`` (the newest cell on the default Python)."""
    cells = list(cells)
    pythons = list(pythons)
    if pythons:
        cells = [c for c in cells if c.python in pythons]
    if quick:
        newest = newest_cell(cells, pythons[0] if len(pythons) == 1 else default_python)
        return [newest] if newest is not None else []
    return cells
