"""Checks of the release artifacts: what each wheel and sdist of `nox -s dist` holds, and the versions.

    python tests/dist_check.py [--root DIR] DIST_DIR

Each wheel holds its own package and its ``.dist-info`` only (no tests, no other package, no
build or cache leftovers), its LICENSE (the repository's) and its README (as the long
description); each sdist the package, README, LICENSE and pyproject.toml, and a plugin's its
whole tests/. ``release_problems`` checks the checkout itself: one version per distribution
(its ``__version__``, read by setuptools), each plugin's puffer-core range holding the core's
version, and CHANGELOG.md, CITATION.cff and the ``common`` extra naming the versions released.
Every problem is one line naming the file and what is wrong. Standard library and
``packaging`` only: it runs in `nox -s dist`'s small venv, and the tests import it.
"""

from __future__ import annotations

import ast
import email.parser
import re
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: Path parts that are build, test or cache output wherever they appear in an artifact.
STRAY_PARTS = {"tests", "test", "__pycache__", "build", "dist", ".git", ".nox", ".venv"}
STRAY_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".so.tmp")
#: What an sdist's top folder may hold besides the package (and a plugin's tests/).
SDIST_FILES = {"PKG-INFO", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "setup.cfg"}


@dataclass(frozen=True)
class Source:
    """One distribution of the checkout: puffer-core at the root, or a plugin under plugins/."""

    name: str  # the distribution, e.g. puffer-plugin-nethack
    folder: Path
    package: str  # the import package, e.g. puffer_plugin_nethack

    @property
    def plugin(self) -> bool:
        return self.package != "puffer_core"

    @property
    def prefix(self) -> str:
        """Where its files are, relative to the checkout: ``""`` or ``"plugins/<name>/"``."""
        return f"plugins/{self.folder.name}/" if self.plugin else ""

    @property
    def stem(self) -> str:
        """The distribution's name as in its file names (``puffer_plugin_nethack``)."""
        return canonicalize_name(self.name).replace("-", "_")

    def version(self) -> str:
        """The ``__version__`` literal of the package's ``__init__.py`` (the one place it is written)."""
        init = self.folder / self.package / "__init__.py"
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
                return ast.literal_eval(node.value)
        raise LookupError(f"{init}: no __version__ = '...' literal")

    def pyproject(self) -> dict:
        return tomllib.loads((self.folder / "pyproject.toml").read_text())


def sources(root: Path = ROOT) -> list[Source]:
    """puffer-core and every plugins/<name> with a pyproject.toml."""
    found = [Source("puffer-core", root, "puffer_core")]
    for folder in sorted(p.parent for p in root.glob("plugins/*/pyproject.toml")):
        found.append(Source(f"puffer-plugin-{folder.name}", folder, f"puffer_plugin_{folder.name}"))
    return found


def _stray(member: str) -> bool:
    parts = PurePosixPath(member).parts
    return any(part in STRAY_PARTS or part.endswith(STRAY_SUFFIXES) for part in parts)


def _metadata_problems(where: str, text: str, source: Source, version: str) -> list[str]:
    """METADATA / PKG-INFO: name, version, license and the README as the description."""
    meta = email.parser.Parser().parsestr(text)
    problems = []
    if canonicalize_name(meta.get("Name", "")) != canonicalize_name(source.name):
        problems.append(f"{where}: its metadata names {meta.get('Name')!r}, not {source.name}")
    if meta.get("Version") != version:
        problems.append(f"{where}: its metadata says version {meta.get('Version')}, the source {version}")
    if meta.get("License-Expression") != "MIT" or "LICENSE" not in meta.get_all("License-File", []):
        problems.append(f"{where}: its metadata lacks License-Expression MIT and License-File LICENSE (pyproject.toml)")
    readme = (source.folder / "README.md").read_text()
    if (meta.get_payload() or "").strip() != readme.strip():
        problems.append(f"{where}: its long description is not {source.prefix}README.md (readme = in pyproject.toml)")
    return problems


def wheel_problems(wheel: Path, source: Source, license_text: str) -> list[str]:
    """What is wrong with ``wheel`` as ``source``'s wheel: files beyond its package and
    .dist-info, strays, a missing or different LICENSE, metadata that does not match."""
    version = source.version()
    info = f"{source.stem}-{version}.dist-info"
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            metadata = archive.read(f"{info}/METADATA").decode() if f"{info}/METADATA" in names else None
            licence = archive.read(f"{info}/licenses/LICENSE").decode() if f"{info}/licenses/LICENSE" in names else None
    except zipfile.BadZipFile as exc:
        return [f"{wheel}: not a wheel ({exc})"]
    problems = []
    for name in names:
        top = name.split("/", 1)[0]
        if top not in (source.package, info):
            problems.append(f"{wheel}: {name} is not part of {source.package} (only it and {info} belong in the wheel)")
        elif _stray(name):
            problems.append(f"{wheel}: {name} is test, cache or build output, not part of the package")
    if f"{source.package}/__init__.py" not in names:
        problems.append(f"{wheel}: no {source.package}/__init__.py (the package is missing)")
    if licence is None:
        problems.append(f"{wheel}: no LICENSE in {info}/licenses (license-files in pyproject.toml, and the file)")
    elif licence != license_text:
        problems.append(f"{wheel}: {info}/licenses/LICENSE differs from the repository's LICENSE")
    if metadata is None:
        problems.append(f"{wheel}: no {info}/METADATA")
    else:
        problems += _metadata_problems(str(wheel), metadata, source, version)
    return problems


def suite_files(source: Source) -> set[str]:
    """The files of a plugin's tests/ (``tests/...``), caches left out: what its sdist must hold."""
    found = (source.folder / "tests").rglob("*")
    return {p.relative_to(source.folder).as_posix() for p in found if p.is_file() and not _stray(p.name)}


def sdist_problems(sdist: Path, source: Source, license_text: str) -> list[str]:
    """What is wrong with ``sdist`` as ``source``'s: strays, a missing LICENSE or README, a
    plugin's tests incomplete, the core's tests present (they need the whole repository)."""
    version = source.version()
    top = f"{source.stem}-{version}"
    try:
        with tarfile.open(sdist) as archive:
            members = {m.name: m for m in archive.getmembers() if m.isfile()}
            read = {
                name: archive.extractfile(members[name]).read().decode() for name in members if name.count("/") == 1
            }
    except (tarfile.TarError, OSError) as exc:
        return [f"{sdist}: not a gzipped tar ({exc})"]
    problems = []
    inside = {name[len(top) + 1 :] for name in members if name.startswith(f"{top}/")}
    for name in sorted(set(members) - {f"{top}/{rel}" for rel in inside}):
        problems.append(f"{sdist}: {name} is outside its top folder {top}/")
    egg_info = f"{source.stem}.egg-info/"  # setuptools' own metadata: every sdist it makes has one
    allowed = (f"{source.package}/", egg_info, *(["tests/"] if source.plugin else []))
    for rel in sorted(inside):
        body = rel.removeprefix("tests/") if source.plugin else rel  # the tests/ a plugin's sdist carries
        if rel not in SDIST_FILES and not rel.startswith(allowed):
            problems.append(f"{sdist}: {rel} does not belong in it (only the package, README, LICENSE, pyproject)")
        elif not rel.startswith(egg_info) and _stray(body):
            problems.append(f"{sdist}: {rel} is test, cache or build output, not part of the package")
    if read.get(f"{top}/LICENSE") != license_text:
        problems.append(f"{sdist}: LICENSE is missing or differs from the repository's LICENSE")
    if "README.md" not in inside or f"{source.package}/__init__.py" not in inside:
        problems.append(f"{sdist}: README.md or {source.package}/__init__.py is missing")
    if source.plugin and (missing := sorted(suite_files(source) - inside)):
        problems.append(f"{sdist}: its tests/ lacks {', '.join(missing)} (MANIFEST.in: graft tests)")
    if "PKG-INFO" in inside:
        problems += _metadata_problems(str(sdist), read[f"{top}/PKG-INFO"], source, version)
    return problems


def _core_requirement(source: Source) -> Requirement | None:
    for text in source.pyproject()["project"].get("dependencies", []):
        if canonicalize_name(Requirement(text).name) == "puffer-core":
            return Requirement(text)
    return None


def _single_source_problems(source: Source) -> list[str]:
    project = source.pyproject()
    where = f"{source.prefix}pyproject.toml"
    attr = project.get("tool", {}).get("setuptools", {}).get("dynamic", {}).get("version", {})
    if "version" in project["project"] or "version" not in project["project"].get("dynamic", []):
        return [f"{where}: the version must be dynamic (read from {source.package}.__version__), not written here"]
    if attr != {"attr": f"{source.package}.__version__"}:
        return [f'{where}: [tool.setuptools.dynamic] must say version = {{ attr = "{source.package}.__version__" }}']
    return []


def release_problems(root: Path = ROOT) -> list[str]:
    """What is inconsistent in the checkout's versions: single sourcing, each plugin's
    puffer-core range, the ``common`` extra's plugin pins, CHANGELOG.md and CITATION.cff."""
    found = sources(root)
    core = found[0]
    core_version = Version(core.version())
    problems = [problem for source in found for problem in _single_source_problems(source)]
    for plugin in found[1:]:
        where = f"{plugin.prefix}pyproject.toml"
        req = _core_requirement(plugin)
        if req is None or not any(spec.operator in ("<", "<=", "==", "~=") for spec in req.specifier):
            problems.append(f"{where}: declare the puffer-core range the plugin supports, e.g. puffer-core>=0.1,<0.2")
        elif core_version not in req.specifier:
            problems.append(f"{where}: {req} does not admit puffer-core {core_version} (widen the range)")
        copy = plugin.folder / "LICENSE"
        if not copy.is_file() or copy.read_bytes() != (root / "LICENSE").read_bytes():
            problems.append(f"{plugin.prefix}LICENSE is missing or differs from the repository's LICENSE (copy it)")
    versions = {canonicalize_name(source.name): source.version() for source in found}
    for text in core.pyproject()["project"].get("optional-dependencies", {}).get("common", []):
        req = Requirement(text)
        wanted = versions.get(canonicalize_name(req.name))
        if wanted is not None and str(req.specifier) != f"=={wanted}":
            problems.append(f"pyproject.toml: the common extra pins {req}, but the plugin's version is {wanted}")
    for name, pattern in (
        ("CHANGELOG.md", rf"^## \[{re.escape(str(core_version))}\]"),
        ("CITATION.cff", rf"^version: \"?{re.escape(str(core_version))}\"?$"),
    ):
        path = root / name
        if not path.is_file() or not re.search(pattern, path.read_text(), re.MULTILINE):
            problems.append(f"{name}: names no release {core_version} (the version of puffer_core/__init__.py)")
    return problems


def dist_problems(dist: Path, root: Path = ROOT) -> list[str]:
    """Every problem of the artifacts in ``dist``: one wheel and one sdist per distribution of
    the checkout, at its version, each checked; nothing else; and the release's versions."""
    license_text = (root / "LICENSE").read_text()
    expected: dict[str, tuple[Source, str]] = {}
    for source in sources(root):
        stem = f"{source.stem}-{source.version()}"
        expected[f"{stem}-py3-none-any.whl"] = (source, "wheel")
        expected[f"{stem}.tar.gz"] = (source, "sdist")
    problems = []
    present = {path.name: path for path in sorted(dist.iterdir())} if dist.is_dir() else {}
    for name in sorted(set(expected) - set(present)):
        problems.append(f"{dist}/{name}: missing (the {expected[name][1]} of {expected[name][0].name})")
    for name, path in present.items():
        if name not in expected:
            problems.append(f"{path}: not an artifact of this checkout's distributions at their versions")
        elif expected[name][1] == "wheel":
            problems += wheel_problems(path, expected[name][0], license_text)
        else:
            problems += sdist_problems(path, expected[name][0], license_text)
    return problems + release_problems(root)


def main(argv: list[str]) -> int:
    root = ROOT
    if argv[:1] == ["--root"]:
        root, argv = Path(argv[1]), argv[2:]
    if len(argv) != 1:
        print("usage: python tests/dist_check.py [--root DIR] DIST_DIR", file=sys.stderr)
        return 2
    problems = dist_problems(Path(argv[0]), root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"dist_check: {len(list(Path(argv[0]).iterdir()))} artifacts hold what they should")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
