"""A project's releases from its index files, and which CPython versions each can install on.

A release is a final version (pre-releases and development releases are left out) with
at least one file that is not yanked. Each usable file says which Pythons it serves:
an sdist serves all (``source``), a ``py3`` wheel all (``any``), ``cpXY`` wheels that
CPython (``==3.Y``), ``abi3`` wheels it and every later one (``>=3.Y``); only wheels for
Linux on this machine's architecture count, as cells run here. Its ``Requires-Python``
bounds all of that.

A file :mod:`~puffer_core.matrix.simple_index` left out (``IndexFile.refused``: its
``Requires-Python`` is not a PEP 440 specifier) counts for nothing. Reading discovered.json
applies the same check (:func:`Release.from_json`): a file kept before the check existed with
such a value is dropped, so the value never reaches a cell's reason or the matrix's tables.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from puffer_core.matrix.simple_index import IndexFile, requires_python_problem

__all__ = ["Release", "ReleaseFile", "linux_platform", "releases_from_files", "tag_python"]


def linux_platform(machine: str | None = None) -> str:
    """The wheels the matrix can use here: ``linux x86_64``."""
    return f"linux {machine or platform.machine()}"


def tag_python(interpreter: str, abi: str) -> str | None:
    """The CPython versions a wheel tag's interpreter and ABI serve: ``any``, ``>=3.9``, ``==3.11`` or None."""
    if interpreter.startswith("py"):
        digits = interpreter[2:]
        if digits == "3":
            return "any"
        return f">=3.{digits[1:]}" if digits[:1] == "3" and digits[1:].isdigit() else None
    if interpreter.startswith("cp"):
        digits = interpreter[2:]
        if digits[:1] != "3" or not digits[1:].isdigit():
            return None
        if abi == "abi3":
            return f">=3.{digits[1:]}"
        if abi.startswith("cp") and abi.endswith("t"):
            return None  # free-threaded builds: cells run the default CPython
        return f"==3.{digits[1:]}"
    return None


def _platform_ok(plat: str, machine: str) -> bool:
    return plat == "any" or (plat.startswith(("manylinux", "linux_")) and plat.endswith("_" + machine))


def _allows(spec: str | None, python: str) -> bool:
    """Whether a specifier admits CPython ``python`` (X.Y: its first or its late patch releases)."""
    if not spec:
        return True
    try:
        specifier = SpecifierSet(spec)
    except InvalidSpecifier:
        return True  # pip ignores an unreadable Requires-Python too
    return any(specifier.contains(Version(v), prereleases=True) for v in (python, f"{python}.99"))


@dataclass(frozen=True)
class ReleaseFile:
    """What one file of a release serves: ``python`` is ``source``, ``any`` or a specifier."""

    python: str
    requires_python: str | None = None

    def serves(self, python: str) -> bool:
        return self.python in ("source", "any") or _allows(self.python, python)


@dataclass(frozen=True)
class Release:
    """One final release of a project and the files it can be installed from here."""

    version: str
    files: tuple[ReleaseFile, ...] = ()

    def install_problem(self, package: str, python: str, where: str | None = None) -> str | None:
        """Why this release cannot be installed on CPython ``python``, or None when it can."""
        where = where or linux_platform()
        if not self.files:
            return f"{package} {self.version} has no sdist and no wheel for {where}"
        allowed = [f for f in self.files if _allows(f.requires_python, python)]
        if not allowed:
            spec = next(f.requires_python for f in self.files if f.requires_python)
            return f"{package} {self.version} declares Requires-Python {spec}"
        if any(f.serves(python) for f in allowed):
            return None
        return f"{package} {self.version} has no sdist and no wheel for CPython {python} ({where})"

    def to_json(self) -> dict[str, Any]:
        return {"files": [{"python": f.python, "requires_python": f.requires_python} for f in self.files]}

    @classmethod
    def from_json(cls, version: str, data: Mapping[str, Any]) -> Release:
        """The release as discovered.json keeps it, without any file whose texts fail the index's checks."""
        files = (ReleaseFile(str(f["python"]), f.get("requires_python")) for f in data.get("files", ()))
        return cls(version, tuple(f for f in files if _checked(f)))


def _checked(file: ReleaseFile) -> bool:
    """Whether a kept file's texts are what discovery writes: a tag's Pythons and a PEP 440 Requires-Python."""
    if file.python not in ("source", "any") and requires_python_problem(file.python):
        return False
    return file.requires_python is None or (
        isinstance(file.requires_python, str) and requires_python_problem(file.requires_python) is None
    )


def _file_version(filename: str, machine: str) -> tuple[Version, list[str]] | None:
    """A file's version and what it serves here (empty: a wheel for other platforms); None if not a dist."""
    try:
        if filename.endswith(".whl"):
            _, version, _, tags = parse_wheel_filename(filename)
            served = {
                served
                for tag in tags
                if _platform_ok(tag.platform, machine) and (served := tag_python(tag.interpreter, tag.abi))
            }
            return version, sorted(served)
        if filename.endswith((".tar.gz", ".zip")):
            return parse_sdist_filename(filename)[1], ["source"]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None


def releases_from_files(files: Iterable[IndexFile], machine: str | None = None) -> dict[str, Release]:
    """Final, not yanked releases, by version string (``1.3.0``), newest first.

    The same file on several indexes counts once; a file listed without ``Requires-Python``
    (a plain folder index) gets the one its release declares elsewhere, as it is release metadata.
    A file the index client refused (``IndexFile.refused``) counts nowhere.
    """
    machine = machine or platform.machine()
    by_name: dict[str, IndexFile] = {}
    for file in files:
        if file.refused is not None or file.yanked:
            continue
        if file.filename not in by_name or by_name[file.filename].requires_python is None:
            by_name[file.filename] = file
    found: dict[Version, list[tuple[list[str], str | None]]] = {}
    for file in by_name.values():
        parsed = _file_version(file.filename, machine)
        if parsed is None or parsed[0].is_prerelease or parsed[0].is_devrelease:
            continue
        found.setdefault(parsed[0], []).append((parsed[1], file.requires_python))
    releases = {}
    for version, entries in sorted(found.items(), reverse=True):
        declared = sorted({spec for _, spec in entries if spec})
        served = {
            ReleaseFile(python, spec or (declared[0] if declared else None))
            for pythons, spec in entries
            for python in pythons
        }
        releases[str(version)] = Release(
            str(version), tuple(sorted(served, key=lambda f: (f.python, f.requires_python or "")))
        )
    return releases
