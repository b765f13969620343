"""What each plugin follows on the package index, and the cells the releases found there add.

A plugin follows its environment package, each of its axes, the companions its newest
version pins, and whatever its ``CompatAxes.follow`` names (whose specifier also bounds
any of the others). A release is new for a plugin when it is newer than every version of
that package the plugin declares, its ``follow`` bound admits it, and it is the newest
release of its minor series (of gymnasium 1.2.1, 1.2.2 and 1.2.3 only 1.2.3: a patch
release supersedes the ones before it). New releases become cells (newest first), beside
the declared ones, whose ids never change:

- a new version of the environment package: a row without companion pins (the resolver
  picks them; the cell's ``resolved`` records what it picked), times the axes;
- a new value of an axis: that axis value with every declared version;
- a new release of a companion or of a ``follow`` package: the newest declared version with
  that package pinned to the release instead (an axis value of the cell, so its id says it:
  ``nethack-nle1.3.0-gymnasium1.4.0-py3.11``).

A cell whose new release cannot install on its Python (``Requires-Python``, wheel tags) is
excluded with that reason; a ``KnownBad`` entry still excludes first, with its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from puffer_core.matrix.model import Cell, cells_for, row_cells, version_key
from puffer_core.matrix.releases import Release
from puffer_core.specs.compat import CompatAxes

__all__ = ["ROLES", "Discovered", "Follow", "discovered_cells", "followed", "plugin_cells"]

#: package (canonical name) → version → release, as discovered.json keeps them
Discovered = Mapping[str, Mapping[str, Release]]

#: How a followed package enters a plugin's cells, strongest first.
ROLES = ("env", "axis", "companion", "follow")


@dataclass(frozen=True)
class Follow:
    """One package one plugin follows: its role, the newest version it declares, the plugin's bound."""

    package: str  # as the plugin spells it
    role: str
    newest: str | None = None
    bound: str = ""

    def wants(self, version: str) -> bool:
        """Whether ``version`` is new for the plugin: above what it declares, inside its bound."""
        parsed = Version(version)
        if self.newest is not None and parsed <= Version(self.newest):
            return False
        return SpecifierSet(self.bound).contains(parsed)

    def new_versions(self, releases: Iterable[str]) -> list[str]:
        """The releases that become cells, newest first: of each minor series (``1.2``) the newest
        release, when the plugin wants it (an older patch of a series is superseded by its newest)."""
        newest_of_series: dict[tuple[int, ...], str] = {}
        for version in sorted(releases, key=version_key, reverse=True):
            newest_of_series.setdefault(Version(version).release[:2], version)
        return [v for v in newest_of_series.values() if self.wants(v)]


def _newest_version(axes: CompatAxes) -> str:
    return max(axes.versions, key=version_key)


def _declared(axes: CompatAxes) -> dict[str, list[str]]:
    """Every version of every package the axes name (canonical name → versions)."""
    found: dict[str, list[str]] = {canonicalize_name(axes.package): list(axes.versions)}
    for pins in axes.pins.values():
        for name, version in pins.items():
            found.setdefault(canonicalize_name(name), []).append(version)
    for name, values in axes.axes.items():
        found.setdefault(canonicalize_name(name), []).extend(values)
    return found


def followed(axes: CompatAxes) -> dict[str, Follow]:
    """The packages one plugin follows, by canonical name."""
    roles: dict[str, tuple[str, str]] = {}  # canonical → (spelling, role); the first role found wins
    roles.setdefault(canonicalize_name(axes.package), (axes.package, "env"))
    for name in axes.axes:
        roles.setdefault(canonicalize_name(name), (name, "axis"))
    for name in axes.pins.get(_newest_version(axes), {}):
        roles.setdefault(canonicalize_name(name), (name, "companion"))
    for name in axes.follow:
        roles.setdefault(canonicalize_name(name), (name, "follow"))
    bounds = {canonicalize_name(name): spec for name, spec in axes.follow.items()}
    declared = _declared(axes)
    return {
        key: Follow(
            package=spelling,
            role=role,
            newest=max(declared[key], key=version_key) if declared.get(key) else None,
            bound=bounds.get(key, ""),
        )
        for key, (spelling, role) in roles.items()
    }


def _pinned_rows(plugin: str, axes: CompatAxes, follow: Follow, versions: list[str]) -> list[Cell]:
    """Cells of the newest declared version with ``follow.package`` pinned to each new release."""
    newest = _newest_version(axes)
    key = canonicalize_name(follow.package)
    companions = {n: v for n, v in axes.pins.get(newest, {}).items() if canonicalize_name(n) != key}
    fixed = {canonicalize_name(n) for n in companions} | {canonicalize_name(axes.package), key}
    others = tuple(
        (name, max(values, key=version_key))
        for name, values in axes.axes.items()
        if canonicalize_name(name) not in fixed and values
    )
    cells = []
    for version in versions:
        cells += row_cells(plugin, axes, newest, companions, ((follow.package, version), *others))
    return cells


def discovered_cells(plugin: str, axes: CompatAxes, discovered: Discovered) -> list[Cell]:
    """The cells the discovered releases add to one plugin's declared ones, newest first."""
    new: dict[str, list[str]] = {}  # canonical → new versions, newest first
    follows = followed(axes)
    for key, follow in follows.items():
        versions = follow.new_versions(discovered.get(key, {}))
        if versions:
            new[key] = versions
    if not new:
        return []
    env_key = canonicalize_name(axes.package)
    extended = dataclasses.replace(
        axes,
        versions=(*axes.versions, *new.get(env_key, ())),
        axes={name: (*values, *new.get(canonicalize_name(name), ())) for name, values in axes.axes.items()},
    )
    declared = {cell.id for cell in cells_for(plugin, axes)}
    cells = [cell for cell in cells_for(plugin, extended) if cell.id not in declared]
    for key, versions in new.items():
        if follows[key].role in ("companion", "follow"):
            cells += [cell for cell in _pinned_rows(plugin, axes, follows[key], versions) if cell.id not in declared]
    cells = [_with_install_problem(cell, new, discovered) for cell in cells]
    return sorted(cells, key=lambda cell: _new_pins_key(cell, new), reverse=True)


def _new_pins(cell: Cell, new: Mapping[str, list[str]]) -> list[tuple[str, str]]:
    return [(n, v) for n, v in cell.pins.items() if v in new.get(canonicalize_name(n), ())]


def _new_pins_key(cell: Cell, new: Mapping[str, list[str]]) -> list:
    return [version_key(version) for _, version in _new_pins(cell, new)]


def _with_install_problem(cell: Cell, new: Mapping[str, list[str]], discovered: Discovered) -> Cell:
    """``cell``, excluded when one of its new releases cannot install on its Python (KnownBad first)."""
    if cell.excluded is not None:
        return cell
    for name, version in _new_pins(cell, new):
        problem = discovered[canonicalize_name(name)][version].install_problem(name, cell.python)
        if problem:
            return dataclasses.replace(cell, excluded=problem)
    return cell


def plugin_cells(plugin: str, axes: CompatAxes, discovered: Discovered | None = None) -> list[Cell]:
    """Every cell of one plugin: the discovered ones (newest first), then the declared ones."""
    extra = discovered_cells(plugin, axes, discovered) if discovered else []
    return [*extra, *cells_for(plugin, axes)]
