"""What a plugin's ``puffer_compat_axes`` returns: ``CompatAxes``, with its ``KnownBad`` combinations.

Checked like every declaration (``validate(plugin)``, by the plugin manager at load time): each
name, version and requirement here ends up on a ``uv pip install`` command line of the matrix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from puffer_core.specs.declarations import (
    CONTROL_CHAR_RE,
    PYTHON_VERSION_RE,
    _check_package,
    _check_str_tuple,
    _check_version,
    _fail,
    requirement_problem,
)

__all__ = ["CompatAxes", "KnownBad"]


@dataclass(frozen=True)
class KnownBad:
    """A combination known not to work, recorded as excluded from the matrix with its reason.

    Args:
        when: Package name (or ``"python"``) → version specifier; the combination matches
            when every one does.
        reason: Why it does not work, shown in the matrix.
    """

    when: Mapping[str, str]
    reason: str

    def matches(self, pins: Mapping[str, str]) -> bool:
        for name, spec in self.when.items():
            version = pins.get(name)
            if version is None:
                return False
            if Version(version) not in SpecifierSet(spec):
                return False
        return True


@dataclass(frozen=True)
class CompatAxes:
    """The versions the compatibility matrix must try for one plugin (what ``puffer_compat_axes`` returns).

    Args:
        package: The plugin's environment package (the rows of its table).
        versions: The versions of ``package`` to try.
        python: The Pythons to try.
        pins: Per version of ``package``, companion packages fixed with it (nle 1.3.0 pins
            gymnasium 1.2.0).
        axes: Further packages whose versions multiply the cells.
        known_bad: Combinations recorded as excluded, with their reason.
        extras: Requirements installed in every cell (``pettingzoo[butterfly]``).
        follow: Further packages ``puffer matrix discover`` follows on the package index, each
            with a version specifier bounding which releases become cells (``{"numpy": ">=2.4"}``;
            ``""`` for no bound). Its environment package, its axes and the companions its newest
            version pins are followed anyway; an entry for one of them bounds it too. A followed
            release becomes a cell only when newer than every version of it declared here.
        tank_only: ``package`` is not on the package index: only PufferTank's environment layer
            builds it (the plugin's Docker stage; DeepMind Lab). Its one cell runs inside a built
            PufferTank image instead of a venv (``puffer matrix run --tank-image``), so it takes
            one version and one Python (the image's), and no pins, axes or follow.
    """

    package: str
    versions: tuple[str, ...]
    python: tuple[str, ...] = ("3.10", "3.11", "3.12", "3.13")
    pins: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    axes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    known_bad: tuple[KnownBad, ...] = ()
    #: Extra requirements installed in every cell (e.g. ``pettingzoo[butterfly]``).
    extras: tuple[str, ...] = ()
    #: Packages followed on the package index → the specifier bounding their new releases.
    follow: Mapping[str, str] = field(default_factory=dict)
    #: The package exists only inside PufferTank: its cell runs in the image, not in a venv.
    tank_only: bool = False

    def validate(self, plugin: str) -> None:
        """Every name, version and requirement here ends up on a ``uv pip install`` command line
        (or decides which cells run), so each must be exactly what it says: a package name, a
        version, a PEP 508 requirement from the package index; never an option, URL or path."""
        what = "CompatAxes"
        _check_package(plugin, what, "package", self.package)
        for version in _check_str_tuple(plugin, what, "versions", self.versions):
            _check_version(plugin, what, "versions", version)
        for py in _check_str_tuple(plugin, what, "python", self.python):
            if not PYTHON_VERSION_RE.match(py):
                raise _fail(plugin, what, "python", f"holds {py!r}; write versions like '3.11'")
        if not isinstance(self.pins, Mapping):
            raise _fail(plugin, what, "pins", "must map a version to {package: version}")
        for version, companions in self.pins.items():
            if version not in self.versions:
                raise _fail(plugin, what, "pins", f"has {version!r}, which is not in versions")
            if not isinstance(companions, Mapping):
                raise _fail(plugin, what, "pins", f"[{version!r}] must be a mapping")
            for name, pinned in companions.items():
                _check_package(plugin, what, f"pins[{version}]", name)
                _check_version(plugin, what, f"pins[{version}][{name}]", pinned)
        if not isinstance(self.axes, Mapping):
            raise _fail(plugin, what, "axes", "must map a package to a list of versions")
        for name, versions in self.axes.items():
            _check_package(plugin, what, "axes", name)
            for version in _check_str_tuple(plugin, what, f"axes[{name}]", versions):
                _check_version(plugin, what, f"axes[{name}]", version)
        if not isinstance(self.known_bad, (list, tuple)):
            raise _fail(plugin, what, "known_bad", f"must be a list of KnownBad, got {self.known_bad!r}")
        for bad in self.known_bad:
            _check_known_bad(plugin, what, bad)
        for requirement in _check_str_tuple(plugin, what, "extras", self.extras):
            problem = requirement_problem(requirement)
            if problem:
                raise _fail(plugin, what, "extras", f"holds {requirement!r}, which {problem}")
        _check_follow(plugin, what, self.follow)
        _check_tank_only(plugin, what, self)


def _check_tank_only(plugin: str, what: str, axes: CompatAxes) -> None:
    """A tank-only package has the one cell a built image can answer for."""
    if not isinstance(axes.tank_only, bool):
        raise _fail(plugin, what, "tank_only", f"must be True or False, not {axes.tank_only!r}")
    if not axes.tank_only:
        return
    for name in ("versions", "python"):
        if len(getattr(axes, name)) != 1:
            problem = f"must hold one entry when tank_only is set (the image builds one), not {getattr(axes, name)!r}"
            raise _fail(plugin, what, name, problem)
    for name in ("pins", "axes", "follow"):
        if getattr(axes, name):
            problem = "must be empty when tank_only is set: the image fixes every version, the index has none"
            raise _fail(plugin, what, name, problem)


def _is_specifier(spec: Any) -> bool:
    """``spec`` is one line of PEP 440 version specifiers (``''``, none, included)."""
    if not isinstance(spec, str) or CONTROL_CHAR_RE.search(spec):
        return False
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        return False
    return True


def _check_follow(plugin: str, what: str, follow: Any) -> None:
    if not isinstance(follow, Mapping):
        raise _fail(plugin, what, "follow", "must map a package to a version specifier ('' for no bound)")
    for name, spec in follow.items():
        _check_package(plugin, what, "follow", name)
        if not _is_specifier(spec):
            problem = f"has {name}: {spec!r}, not a version specifier ('>=2.4', or '' for none)"
            raise _fail(plugin, what, "follow", problem)


def _check_known_bad(plugin: str, what: str, bad: Any) -> None:
    if not isinstance(bad, KnownBad):
        raise _fail(plugin, what, "known_bad", f"holds {bad!r}, not a KnownBad")
    if not isinstance(bad.when, Mapping) or not bad.when:
        raise _fail(plugin, what, "known_bad", f"entry {bad.when!r} must map packages (or 'python') to specifiers")
    if not isinstance(bad.reason, str) or not bad.reason.strip():
        raise _fail(plugin, what, "known_bad", f"entry {dict(bad.when)!r} needs a reason")
    if CONTROL_CHAR_RE.search(bad.reason):
        raise _fail(plugin, what, "known_bad", f"entry {dict(bad.when)!r} has a reason of more than one line")
    for name, spec in bad.when.items():
        if not (isinstance(name, str) and name.lower() == "python"):
            _check_package(plugin, what, "known_bad", name)
        if not _is_specifier(spec):
            raise _fail(plugin, what, "known_bad", f"has {name}: {spec!r}, not a version specifier")
