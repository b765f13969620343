"""An installation compared with what the matrix verified (verified.json): `puffer doctor`'s verdicts.

Pure logic: the caller passes the running Python (X.Y), the installed distributions (canonical
name -> version, ``installed_versions()``) and verified.json's content (``shipped.load_verified``),
so a test builds any installation and any matrix result it needs.

Verdicts:

- verified: a cell passed on this Python with exactly the installed versions of its pins (a
  plugin), or some passing cell on this Python resolved this version (a package);
- known bad: one of the plugin's known-bad rules matches, or a cell on this Python with
  exactly these pins failed (not one the matrix excluded: its rule says why; nor one that
  never ran them, ``NEVER_RAN``: no interpreter, no PufferTank image);
- not verified: anything else, with the nearest verified set and the command that installs it;
- in PufferTank: a plugin whose package is on no index (``CompatAxes.tank_only``, DeepMind Lab)
  and is not installed: only PufferTank's image has it, so it is said, not held against this
  installation (like "not installed" and "not used", it does not fail the report).

Every fix names what an index serves: a plugin's packages (never its distribution, which a
checkout installs), through ``puffer constraints`` only where the set pins them.

A package is judged only where it matters here: puffer-core's own dependencies, and what the
cells of the installed plugins (at their installed versions) pin or resolve; another one
(setuptools of a venv, say) is "not used". A package not installed is "not installed".
"""

from __future__ import annotations

import importlib.metadata as metadata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from puffer_core.matrix.model import version_key, when_matches

__all__ = [
    "IN_TANK",
    "KNOWN_BAD",
    "NOT_INSTALLED",
    "NOT_USED",
    "NOT_VERIFIED",
    "REPORT_SCHEMA",
    "VERIFIED",
    "Finding",
    "Report",
    "core_finding",
    "diagnose",
    "installed_versions",
    "known_bad_warning",
    "needed_names",
    "package_findings",
    "plugin_finding",
    "plugin_names",
    "python_finding",
]

VERIFIED, NOT_VERIFIED, KNOWN_BAD = "verified", "not verified", "known bad"
NOT_INSTALLED, NOT_USED = "not installed", "not used"  # neutral: they do not fail the report
IN_TANK = "in PufferTank"  # neutral too: what no index serves cannot be installed here
REPORT_SCHEMA = 1
#: Packages every report lists, besides those the cells pin (the peers' APIs and their arrays).
AXIS_PACKAGES = ("numpy", "gymnasium", "shimmy", "pettingzoo", "gym")
#: puffer-core's own dependencies among them: judged whichever plugins are installed.
CORE_DEPENDENCIES = ("numpy", "gymnasium")
CORE = "puffer-core"
CONSTRAINED_INSTALL = "pip install -c <(puffer constraints) {}"


@dataclass(frozen=True)
class Finding:
    """One line of the report: what is installed, its verdict, why, and what would fix it."""

    name: str
    version: str | None
    verdict: str
    reason: str = ""
    fix: str | None = None
    cell: str | None = None  # the cell that decided the verdict, if one did
    nearest: dict[str, str] | None = None  # the nearest verified pins (not verified, known bad)
    pins: dict[str, str | None] = field(default_factory=dict)  # a plugin's axes as installed

    @property
    def fails(self) -> bool:
        return self.verdict in (NOT_VERIFIED, KNOWN_BAD)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "verdict": self.verdict,
            "reason": self.reason,
            "fix": self.fix,
            "cell": self.cell,
            "nearest": self.nearest,
            "installed": self.pins,
        }


@dataclass(frozen=True)
class Report:
    """Python, puffer-core, every installed plugin and every axis package, each with its verdict."""

    python: Finding
    core: Finding
    plugins: tuple[Finding, ...]
    packages: tuple[Finding, ...]

    @property
    def findings(self) -> tuple[Finding, ...]:
        return (self.python, self.core, *self.plugins, *self.packages)

    @property
    def ok(self) -> bool:
        """True when nothing is not verified or known bad (``puffer doctor`` exits 0)."""
        return not any(finding.fails for finding in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "ok": self.ok,
            "python": self.python.to_json(),
            "puffer_core": self.core.to_json(),
            "plugins": [finding.to_json() for finding in self.plugins],
            "packages": [finding.to_json() for finding in self.packages],
        }


def installed_versions(names: Iterable[str] | None = None) -> dict[str, str]:
    """Canonical distribution name -> version of what this interpreter has installed (only
    ``names``, when given: a few look-ups instead of a scan of site-packages)."""
    if names is not None:
        found = {}
        for name in {canonicalize_name(n) for n in names}:
            try:
                found[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return found
    versions: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:  # the first one on the path wins, as for imports
            versions.setdefault(canonicalize_name(name), dist.version)
    return versions


def _canonical(installed: Mapping[str, str]) -> dict[str, str]:
    return {canonicalize_name(name): version for name, version in installed.items()}


def _same(a: str | None, b: str | None) -> bool:
    """Two versions are the same release (1.0 == 1.0.0); text comparison where one is not PEP 440."""
    if a is None or b is None:
        return False
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _pins_match(pins: Mapping[str, str], installed: Mapping[str, str]) -> bool:
    """Every pin equals the installed version (a pinned companion not installed does not match)."""
    return bool(pins) and all(_same(installed.get(canonicalize_name(n)), v) for n, v in pins.items())


def _cells(data: Mapping[str, Any], plugin: str, python: str, outcome: str | None = None) -> list[dict]:
    return [
        cell
        for cell in data.get("cells") or []
        if cell.get("plugin") == plugin and cell.get("python") == python and outcome in (None, cell.get("outcome"))
    ]


def plugin_names(data: Mapping[str, Any], installed: Mapping[str, str]) -> list[str]:
    """The matrix's plugins installed here: by distribution, a built-in one (no distribution) by its package."""
    installed = _canonical(installed)
    names = []
    for name, info in (data.get("plugins") or {}).items():
        marker = info.get("distribution") or info.get("package")
        if marker and canonicalize_name(marker) in installed:
            names.append(name)
    return names


def _current(cells: list[dict], package: str, installed: Mapping[str, str]) -> list[dict]:
    """The cells that ran the installed version of the plugin's package."""
    version = installed.get(package)
    return [
        c for c in cells if any(canonicalize_name(n) == package and _same(version, v) for n, v in c["pins"].items())
    ]


def _axes(data: Mapping[str, Any], plugin: str, python: str, installed: Mapping[str, str]) -> list[str]:
    """The packages the plugin's cells pin, its package first: those of the cells that ran its
    installed version on this Python, else of all its cells on this Python (else anywhere)."""
    info = (data.get("plugins") or {}).get(plugin) or {}
    package = canonicalize_name(info.get("package") or "")
    cells = _cells(data, plugin, python) or [c for c in data.get("cells") or [] if c.get("plugin") == plugin]
    names = [package] if package else []
    for cell in _current(cells, package, installed) or cells:
        names += [canonicalize_name(n) for n in cell.get("pins") or {} if canonicalize_name(n) not in names]
    return names


def _nearest(data: Mapping[str, Any], plugin: str, python: str) -> tuple[dict | None, str | None, str]:
    """The nearest verified set of ``plugin`` on ``python``: its pins, the command that installs
    it, and which set it is (the common set when the plugin is a member, else its newest passing cell)."""
    info = (data.get("plugins") or {}).get(plugin) or {}
    section = (data.get("commons") or {}).get(python) or {}
    if section.get("outcome") == "pass" and plugin in (section.get("members") or {}):
        pins = dict(section["members"][plugin])
        # The plugin is installed already: the fix moves its packages (an index serves them).
        names = " ".join(pins) or info.get("package") or ""
        return pins, CONSTRAINED_INSTALL.format(names), f"the common set of Python {python}"
    passing = _cells(data, plugin, python, "pass")
    if not passing:
        return None, None, ""
    package = info.get("package") or ""
    newest = max(
        passing,
        key=lambda c: (version_key(c["pins"].get(package)), sorted(version_key(v) for v in c["pins"].values())),
    )
    pins = " ".join(f"'{name}=={version}'" for name, version in newest["pins"].items())
    return dict(newest["pins"]), f"pip install {pins}", f"cell {newest['id']}"


def _described(pins: Mapping[str, str | None]) -> str:
    return ", ".join(f"{name} {version or '(not installed)'}" for name, version in pins.items()) or "nothing"


#: Outcomes of cells that never tried their combination: they judge nothing.
NEVER_RAN = ("interpreter-missing", "tank-missing")


def plugin_finding(plugin: str, python: str, installed: Mapping[str, str], data: Mapping[str, Any]) -> Finding:
    """The verdict on ``plugin`` as installed here (see the module's docstring)."""
    installed = _canonical(installed)
    info = (data.get("plugins") or {}).get(plugin)
    if info is None:
        return Finding(plugin, None, NOT_VERIFIED, f"the matrix has no cells for plugin {plugin}")
    # A built-in plugin (no distribution) is puffer-core's: its version is puffer-core's line.
    dist = info.get("distribution")
    version = installed.get(canonicalize_name(dist)) if dist else None
    pins = {name: installed.get(name) for name in _axes(data, plugin, python, installed)}
    nearest, fix, which = _nearest(data, plugin, python)
    found = dict(name=plugin, version=version, nearest=nearest, fix=fix, pins=pins)
    package = info.get("package")
    if package and canonicalize_name(package) not in installed and info.get("tank_only"):
        return Finding(plugin, version, IN_TANK, tank_only_reason(package), pins=pins)
    if package and canonicalize_name(package) not in installed:
        reason = f"its package {package} is not installed"
        reason += (
            f"; nearest verified: {which}" if which else f"; the matrix verified no set of {plugin} on Python {python}"
        )
        return Finding(verdict=NOT_VERIFIED, reason=reason, **found)
    for rule in info.get("known_bad") or []:
        if when_matches(rule.get("when") or {}, {**installed, "python": python}):
            return Finding(verdict=KNOWN_BAD, reason=rule.get("reason") or "a known-bad rule matches", **found)
    matching = [cell for cell in _cells(data, plugin, python) if _pins_match(cell.get("pins") or {}, installed)]
    for cell in matching:
        if cell.get("outcome") == "pass":
            found.update(nearest=None, fix=None)
            return Finding(verdict=VERIFIED, reason=f"cell {cell['id']} passed", cell=cell["id"], **found)
    for cell in matching:
        if cell.get("outcome") not in ("excluded", *NEVER_RAN):
            reason = f"cell {cell['id']}: {cell.get('outcome')}" + (f": {cell['reason']}" if cell.get("reason") else "")
            return Finding(verdict=KNOWN_BAD, reason=reason, cell=cell["id"], **found)
    reason = f"no cell on Python {python} ran {_described(pins)}"
    reason += (
        f"; nearest verified: {which}" if which else f"; the matrix verified no set of {plugin} on Python {python}"
    )
    return Finding(verdict=NOT_VERIFIED, reason=reason, **found)


def tank_only_reason(package: str) -> str:
    """Why a package only PufferTank has is not judged here."""
    return f"{package} is on no package index: only PufferTank's image has it (docs/installation.md, PufferTank)"


def _tank_only_packages(data: Mapping[str, Any]) -> set[str]:
    plugins = (data.get("plugins") or {}).values()
    return {canonicalize_name(info["package"]) for info in plugins if info.get("tank_only") and info.get("package")}


def known_bad_warning(plugin: str, python: str, installed: Mapping[str, str], data: Mapping[str, Any]) -> str | None:
    """One line when ``plugin`` as installed is known bad on ``python``; None when verified or unknown."""
    if plugin not in (data.get("plugins") or {}):
        return None
    finding = plugin_finding(plugin, python, installed, data)
    if finding.verdict != KNOWN_BAD:
        return None
    return (
        f"{plugin} as installed ({_described(finding.pins)}, Python {python}) is known bad: {finding.reason} "
        "(`puffer doctor` names the verified set)"
    )


def needed_names(plugin: str, data: Mapping[str, Any]) -> set[str]:
    """The distributions whose versions decide ``plugin``'s verdict (for a few cheap look-ups)."""
    info = (data.get("plugins") or {}).get(plugin) or {}
    names = {info.get("distribution"), info.get("package")}
    names |= {name for rule in info.get("known_bad") or [] for name in rule.get("when") or {}}
    names |= {
        name for cell in data.get("cells") or [] if cell.get("plugin") == plugin for name in cell.get("pins") or {}
    }
    return {name for name in names if name and name != "python"}


def _passing_resolved(data: Mapping[str, Any], python: str) -> dict[str, dict[str, list[dict]]]:
    """Canonical package -> {version: the passing cells on ``python`` that resolved it, in the matrix's order}."""
    seen: dict[str, dict[str, list[dict]]] = {}
    for cell in data.get("cells") or []:
        if cell.get("python") != python or cell.get("outcome") != "pass":
            continue
        for name, version in {**(cell.get("resolved") or {}), **(cell.get("pins") or {})}.items():
            seen.setdefault(canonicalize_name(name), {}).setdefault(version, []).append(cell)
    return seen


def _differences(cell: Mapping[str, Any], installed: Mapping[str, str]) -> list[str]:
    """Where a cell's pins differ from what is installed here: ``ale-py 0.10.2 (0.12.1 here)``."""
    found = []
    for name, version in (cell.get("pins") or {}).items():
        here = installed.get(canonicalize_name(name))
        if not _same(here, version):
            found.append(f"{name} {version} ({here or 'not installed'} here)")
    return found


def _cited(cells: list[dict], installed: Mapping[str, str]) -> tuple[str, str]:
    """The cell to cite for a verdict, and why in words: one whose pins are all installed here at its versions,
    else the nearest (the fewest pins apart), said as such with what differs."""
    best = min(cells, key=lambda cell: len(_differences(cell, installed)))
    differs = _differences(best, installed)
    if not differs:
        return best["id"], f"cell {best['id']} passed with it and the versions installed here"
    return best["id"], f"cell {best['id']} passed with it (nearest: it had {', '.join(differs)})"


def _minor(python: str) -> int:
    """3.11 -> 11 (0 for anything else): how far two Pythons are apart."""
    major, _, minor = python.partition(".")
    return int(minor) if major == "3" and minor.isdigit() else 0


def python_finding(python: str, data: Mapping[str, Any]) -> Finding:
    """Verified when this Python's common set passed (a constraint set ships for it)."""
    commons = data.get("commons") or {}
    if (commons.get(python) or {}).get("outcome") == "pass":
        return Finding("python", python, VERIFIED, f"the common set of Python {python} passed its joint cell")
    verified = [version for version, section in commons.items() if section.get("outcome") == "pass"]
    closest = min(verified, key=lambda v: abs(_minor(v) - _minor(python)), default=None)
    fix = f"use Python {closest} (e.g. uv venv --python {closest})" if closest else None
    ran = any(cell.get("python") == python for cell in data.get("cells") or [])
    if ran:
        outcome = (commons.get(python) or {}).get("outcome", "not run")
        reason = f"no verified common set on Python {python} (its joint cell: {outcome})"
    else:
        reason = f"the matrix ran nothing on Python {python}"
    reason += f"; verified on {', '.join(verified)}" if verified else "; it verified no Python"
    return Finding("python", python, NOT_VERIFIED, reason, fix=fix)


def core_finding(
    version: str, python: str, data: Mapping[str, Any], installed: Mapping[str, str] | None = None
) -> Finding:
    """Verified when a passing cell on this Python ran this puffer-core (the one citing the installed versions)."""
    ran = _passing_resolved(data, python).get(CORE, {})
    cells = [cell for v, found in ran.items() if _same(version, v) for cell in found]
    if cells:
        cell, reason = _cited(cells, _canonical(installed or {}))
        return Finding(CORE, version, VERIFIED, reason, cell=cell)
    others = ", ".join(sorted(ran, key=version_key)) or "none"
    reason = f"no passing cell on Python {python} ran puffer-core {version} (the matrix ran: {others})"
    return Finding(CORE, version, NOT_VERIFIED, reason, fix="re-run the matrix for this puffer-core: nox -s compat")


def _used(data: Mapping[str, Any], python: str, plugins: Iterable[str], installed: Mapping[str, str]) -> set[str]:
    """The packages that matter here: puffer-core's dependencies, and what the cells of the
    installed plugins at their installed package versions (all their cells, where none is)
    pin or resolve on this Python."""
    used = set(CORE_DEPENDENCIES)
    for plugin in plugins:
        package = canonicalize_name(((data.get("plugins") or {}).get(plugin) or {}).get("package") or "")
        cells = _cells(data, plugin, python)
        current = _current(cells, package, installed)
        for cell in current or cells:
            used |= {canonicalize_name(n) for n in {**(cell.get("resolved") or {}), **(cell.get("pins") or {})}}
    return used


def package_findings(
    python: str, installed: Mapping[str, str], data: Mapping[str, Any], plugins: Iterable[str]
) -> list[Finding]:
    """Every package the matrix has axes for (what any cell pins, and AXIS_PACKAGES), by name."""
    installed = _canonical(installed)
    names = {canonicalize_name(n) for cell in data.get("cells") or [] for n in cell.get("pins") or {}}
    names |= set(AXIS_PACKAGES)
    names.discard("python")
    resolved = _passing_resolved(data, python)
    used = _used(data, python, plugins, installed)
    section = (data.get("commons") or {}).get(python) or {}
    # `pip install -c <(puffer constraints) NAME` moves NAME only where the set pins it.
    pinned = set(section.get("pinned") or ()) if section.get("outcome") == "pass" else set()
    tank_only = _tank_only_packages(data)
    findings = []
    for name in sorted(names):
        version = installed.get(name)
        seen = resolved.get(name, {})
        cells = [cell for v, found in seen.items() if _same(version, v) for cell in found]
        if version is None and name in tank_only:
            findings.append(Finding(name, None, IN_TANK, tank_only_reason(name)))
        elif version is None:
            findings.append(Finding(name, None, NOT_INSTALLED))
        elif cells:
            cell, reason = _cited(cells, installed)
            findings.append(Finding(name, version, VERIFIED, reason, cell=cell))
        elif name not in used:
            findings.append(Finding(name, version, NOT_USED, "no cell of the installed plugins' versions uses it"))
        else:
            newest = max(seen, key=version_key, default=None)
            nearest = {name: newest} if newest else None
            fix = (
                CONSTRAINED_INSTALL.format(name)
                if name in pinned
                else (f"pip install '{name}=={newest}'" if newest else None)
            )
            ran = ", ".join(sorted(seen, key=version_key)) or "none"
            reason = f"no passing cell on Python {python} resolved {name} {version} (verified: {ran})"
            findings.append(Finding(name, version, NOT_VERIFIED, reason, fix=fix, nearest=nearest))
    return findings


def diagnose(
    python: str,
    installed: Mapping[str, str],
    data: Mapping[str, Any],
    core_version: str,
    loaded: Iterable[str] = (),
) -> Report:
    """The report on an installation: ``python`` X.Y, ``installed`` name -> version, verified.json's
    ``data``, puffer-core's version, and the names of the plugins loaded from entry points (those
    the matrix does not know are not verified; the others are found by their distributions too)."""
    installed = _canonical(installed)
    names = plugin_names(data, installed)
    names += [name for name in loaded if name not in names]
    plugins = tuple(plugin_finding(name, python, installed, data) for name in sorted(names))
    return Report(
        python=python_finding(python, data),
        core=core_finding(core_version, python, data, installed),
        plugins=plugins,
        packages=tuple(package_findings(python, installed, data, names)),
    )
