"""PufferTank's hash-locked Python set, ``tank/requirements-envs.txt``: made, read and checked.

The common constraint set (``compat_matrix/constraints-common.txt``) says which versions
work together; it cannot say which *bytes*: ``name==version`` lets a re-uploaded or
look-alike file through. The hash-locked set adds, for every package the tank installs,
the sha256 of each file the index publishes for that version, and layer 2 installs it
with ``pip install --require-hashes``, so two builds from one checkout install the same
bytes or fail.

- ``puffer tank compile`` (:func:`compile_hashlock`) resolves the roots — the common set's
  pins, plus the dependencies and build backends of puffer-core and of every plugin in
  ``plugins/`` (layer 3 installs those from the checkout with ``--no-deps``, so their
  dependencies must come from here), plus the plugins' ``DockerLayer.pip`` — with
  ``uv pip compile --generate-hashes`` for CPython 3.11 on x86_64 manylinux, under the
  common set as constraints. It needs the package index; it is never run by a render.
- The file's header lists the roots, so ``puffer tank compile --check`` (offline) says
  whether the file still answers the checkout, and :meth:`HashLock.check_covers` (every
  render) refuses a set that does not pin the constraint set's versions.
- The local projects (puffer-core, the plugins) are not in it: a directory cannot be hash
  checked. Layer 3 installs them from the checkout with ``--no-deps`` on top of this set.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from puffer_core.matrix.pyproject import read_pyproject
from puffer_core.matrix.uv import find_uv
from puffer_core.specs.declarations import DockerLayer
from puffer_core.tank.errors import TankError

__all__ = [
    "BUILD_BACKENDS",
    "DEFAULT_HASHLOCK",
    "HASHLOCK_IN_IMAGE",
    "TARGET",
    "HashLock",
    "HashLockError",
    "HashedRequirement",
    "compile_hashlock",
    "compile_roots",
    "load_hashlock",
    "parse_hashlock",
    "require_uv",
    "roots_drift",
]

#: Path relative to the repository root.
DEFAULT_HASHLOCK = "tank/requirements-envs.txt"
#: Where layer 2 copies it (layer 3 reads it there).
HASHLOCK_IN_IMAGE = "/opt/puffertank/requirements-envs.txt"
#: Installed first, from the set itself: the sdists in the set build against them
#: (``--no-build-isolation``), because an isolated build would fetch them unchecked.
BUILD_BACKENDS = ("setuptools", "wheel")
#: The interpreter and platform the set is resolved for: the tank's Python 3.11 on x86_64
#: glibc (Debian 12 and Ubuntu 22.04 are both manylinux_2_28 or newer).
PYTHON_VERSION = "3.11"
PYTHON_PLATFORM = "x86_64-manylinux_2_28"
#: PEP 508 marker environment of that target, for the roots' and constraints' markers.
TARGET = {
    "implementation_name": "cpython",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_system": "Linux",
    "python_full_version": "3.11.0",
    "python_version": PYTHON_VERSION,
    "sys_platform": "linux",
}
COMPILE_COMMAND = "nox -s tank -- --compile (same as: puffer tank compile)"
ROOTS_HEADING = "# roots:"
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


class HashLockError(TankError):
    """The hash-locked set is missing, malformed, or does not answer the checkout."""


@dataclass(frozen=True)
class HashedRequirement:
    """One package of the set: its pin, the sha256 of every file allowed for it, who needs it."""

    name: str
    version: str
    line: str
    hashes: tuple[str, ...]
    via: tuple[str, ...] = ()

    def requirement_line(self) -> str:
        """The entry as one requirements-file line (``name==version --hash=... --hash=...``)."""
        return " ".join([self.line, *(f"--hash={digest}" for digest in self.hashes)])


@dataclass(frozen=True)
class HashLock:
    """A parsed hash-locked set: ``entries`` by canonical name, the ``roots`` its header lists."""

    entries: Mapping[str, HashedRequirement]
    roots: tuple[str, ...]
    sha256: str
    path: str = DEFAULT_HASHLOCK

    def backends(self) -> list[HashedRequirement]:
        """The build backends the set pins (installed before the rest)."""
        return [self.entries[name] for name in BUILD_BACKENDS if name in self.entries]

    def check_covers(
        self,
        constraints: Iterable[str],
        layers: Mapping[str, DockerLayer],
        local: Iterable[str] = (),
        constraints_source: str = "the constraint set",
    ) -> None:
        """HashLockError unless the set pins every constraint's version and every plugin's pip need.

        ``local``: canonical names of the checkout's own projects, which layer 3 installs
        from source and the set leaves out.
        """
        local = {canonicalize_name(name) for name in local}
        for line in constraints:
            req = Requirement(line)
            name = canonicalize_name(req.name)
            if name in local or (req.marker is not None and not req.marker.evaluate(TARGET)):
                continue
            self._require(req, f"{line!r} of {constraints_source}")
        for plugin, layer in layers.items():
            for text in layer.pip:
                req = Requirement(text)
                if req.marker is None or req.marker.evaluate(TARGET):
                    self._require(req, f"plugin {plugin!r} needs {text!r} (DockerLayer.pip)")

    def _require(self, req: Requirement, what: str) -> None:
        entry = self.entries.get(canonicalize_name(req.name))
        if entry is None:
            found = "does not pin it"
        elif not req.specifier.contains(entry.version, prereleases=True):
            found = f"pins {entry.name}=={entry.version}"
        else:
            return
        raise HashLockError(
            f"{self.path} {found}, but {what}: the hash-locked set is out of date. Recompile it: "
            f"{COMPILE_COMMAND} (for another constraint set: puffer tank compile --constraints PATH "
            "--output FILE, then render with --requirements FILE)"
        )


def requirement_of(line: str, where: str, error: type[TankError], holds: str) -> Requirement:
    """``line`` (of the file ``where`` names) as a requirement; ``error`` for a pip option (the file ``holds``
    something else) or a line that is not one."""
    if line.startswith("-"):
        raise error(f"{where}: {line[:60]!r} is a pip option; {holds}")
    try:
        return Requirement(line)
    except InvalidRequirement as exc:
        raise error(f"{where}: {line[:80]!r} is not a requirement ({exc})") from None


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Requirement lines with their backslash continuations joined, and their first line number."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        out.append((start, pending + stripped))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _vias(text: str) -> dict[str, tuple[str, ...]]:
    """uv's ``# via`` annotations: which packages (or input files) need each entry."""
    vias: dict[str, list[str]] = {}
    current = None
    for raw in text.splitlines():
        stripped = raw.strip()
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", stripped)
        if match and not raw.startswith(" "):
            current = canonicalize_name(match.group(1))
            vias[current] = []
        elif current and stripped.startswith("#"):
            words = stripped.lstrip("#").strip()
            if words.startswith("via"):
                words = words[3:].strip()
            if words:
                vias[current].append(words)
    return {name: tuple(found) for name, found in vias.items()}


def parse_hashlock(text: str, source: str = DEFAULT_HASHLOCK) -> HashLock:
    """Read a hash-locked set: pinned, hashed requirements (pip's ``--require-hashes`` format)."""
    entries: dict[str, HashedRequirement] = {}
    vias = _vias(text)
    for number, line in _logical_lines(text):
        where = f"{source}, line {number}"
        words = line.split()
        hashes = tuple(word.removeprefix("--hash=") for word in words if word.startswith("--hash="))
        rest = " ".join(word for word in words if not word.startswith("--hash="))
        req = requirement_of(rest, where, HashLockError, "the set holds pinned requirements only")
        pins = [spec.version for spec in req.specifier if spec.operator == "=="]
        if len(req.specifier) != 1 or not pins or req.url:
            raise HashLockError(f"{where}: {rest!r} is not pinned as NAME==VERSION; pip --require-hashes needs pins")
        bad = [digest for digest in hashes if not _HASH.match(digest)]
        if not hashes or bad:
            raise HashLockError(
                f"{where}: {req.name}=={pins[0]} has no --hash=sha256:<64 hex digits>"
                + (f" (got {bad[0][:80]!r})" if bad else "")
                + f"; recompile: {COMPILE_COMMAND}"
            )
        name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate(TARGET):
            continue
        entries[name] = HashedRequirement(name, pins[0], rest, hashes, vias.get(name, ()))
    if not entries:
        raise HashLockError(f"{source} pins no package; compile it: {COMPILE_COMMAND}")
    roots = _header_roots(text)
    return HashLock(entries, roots, hashlib.sha256(text.encode()).hexdigest(), source)


def _header_roots(text: str) -> tuple[str, ...]:
    lines = text.splitlines()
    if ROOTS_HEADING not in lines:
        return ()
    roots = []
    for line in lines[lines.index(ROOTS_HEADING) + 1 :]:
        if not line.startswith("#   "):
            break
        roots.append(line[4:].strip())
    return tuple(roots)


def load_hashlock(path: str | pathlib.Path, display: str | None = None) -> HashLock:
    """Read the file at ``path``; a missing one says how to make it (or do without)."""
    path = pathlib.Path(path)
    shown = display or str(path)
    if not path.is_file():
        raise HashLockError(
            f"the hash-locked set {shown} does not exist. Compile it with {COMPILE_COMMAND} "
            "(needs the package index), give another with --requirements PATH, "
            "or render unpinned with --no-constraints."
        )
    return parse_hashlock(path.read_text(encoding="utf-8"), shown)


# -- compiling ------------------------------------------------------------------------------


def _project_needs(pyproject: pathlib.Path) -> tuple[str, list[str]]:
    """A pyproject.toml's project name and what it needs: dependencies, build backends and
    the extras its ``[tool.puffertank] extras`` names (tank/puffertank-deps.py reads the same)."""
    table = read_pyproject(pyproject)
    project = table.get("project", {})
    needs = list(table.get("build-system", {}).get("requires", [])) + list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in table.get("tool", {}).get("puffertank", {}).get("extras", []):
        if extra not in optional:
            raise HashLockError(f"{pyproject}: [tool.puffertank] extras names {extra!r}, which is not an extra there")
        needs += optional[extra]
    return canonicalize_name(project.get("name", pyproject.parent.name)), needs


def compile_roots(
    root: pathlib.Path, constraints: Iterable[str], layers: Mapping[str, DockerLayer]
) -> tuple[list[str], set[str]]:
    """The roots of the set (sorted, de-duplicated) and the checkout's own project names.

    Roots: the constraint set's pins, the needs of puffer-core and of every
    ``plugins/*/pyproject.toml`` (whatever the render selects: one set for the checkout), and
    the plugins' ``DockerLayer.pip``; markers that do not hold on the target are dropped.
    """
    projects = [root / "pyproject.toml", *sorted((root / "plugins").glob("*/pyproject.toml"))]
    found = [_project_needs(path) for path in projects if path.is_file()]
    local = {name for name, _ in found}
    roots: dict[str, str] = {}
    candidates = [*constraints, *(need for _, needs in found for need in needs)]
    candidates += [req for layer in layers.values() for req in layer.pip]
    for text in candidates:
        req = Requirement(text)
        if canonicalize_name(req.name) in local:
            continue
        if req.marker is not None and not req.marker.evaluate(TARGET):
            continue
        req.marker = None
        line = str(req)
        roots[line] = f"{canonicalize_name(req.name)}\0{line}"
    return sorted(roots, key=lambda line: roots[line]), local


def require_uv() -> str:
    """The ``uv`` executable, or HashLockError saying how to get it."""
    found = find_uv()
    if found is None:
        raise HashLockError("uv is not installed, and `puffer tank compile` resolves with it: pip install uv")
    return found


def roots_drift(hashlock: HashLock, roots: list[str]) -> str | None:
    """How the file's roots differ from the checkout's (new, gone, or reordered); None when they agree."""
    if list(hashlock.roots) == roots:
        return None
    added = sorted(set(roots) - set(hashlock.roots))
    gone = sorted(set(hashlock.roots) - set(roots))
    parts = [f"new roots: {', '.join(added)}" if added else "", f"gone: {', '.join(gone)}" if gone else ""]
    return "; ".join(part for part in parts if part) or "roots reordered"


def header(roots: Iterable[str], constraints_source: str, constraints_sha256: str) -> str:
    """The generated file's header: what it is, what made it, from what, how to redo it."""
    lines = [
        "# GENERATED FILE: do not edit. PufferTank's hash-locked Python set: layer 2 (tank/Dockerfile.envs)",
        "# installs it with `pip install --require-hashes`; layer 3 then installs puffer-core and the",
        "# plugins from the checkout with --no-deps on top of it.",
        "# Compiled by `puffer tank compile` (uv pip compile --generate-hashes, for CPython "
        f"{PYTHON_VERSION} on {PYTHON_PLATFORM})",
        f"# from the common constraint set {constraints_source} (sha256 {constraints_sha256[:16]}...) and the",
        "# dependencies and build backends of puffer-core and of every plugin in plugins/.",
        f"# Regenerate: {COMPILE_COMMAND}; needs the package index.",
        "# `puffer tank compile --check` (offline) says whether the roots below still answer the checkout.",
        "#",
        ROOTS_HEADING,
        *(f"#   {line}" for line in roots),
        "",
    ]
    return "\n".join(lines) + "\n"


def compile_hashlock(
    roots: list[str],
    constraints_text: str,
    constraints_source: str,
    *,
    previous: str | None = None,
    upgrade: bool = False,
    uv: str | None = None,
    timeout: float = 600,
) -> str:
    """The text of a hash-locked set for ``roots``, resolved by uv under ``constraints_text``.

    ``previous`` (the current file) is handed to uv as the output it updates, so versions
    that need not move stay where they were; ``upgrade`` moves everything to the newest
    allowed. The constraint lines are passed as given; uv reads them as pip does.
    """
    uv = uv or require_uv()
    with tempfile.TemporaryDirectory(prefix="puffertank-compile-") as folder:
        work = pathlib.Path(folder)
        # Fixed names, run from this folder: uv's `# via` annotations name them, and the
        # output must not depend on where the temporary folder was.
        (work / "roots.in").write_text("".join(f"{line}\n" for line in roots), encoding="utf-8")
        (work / "constraints.txt").write_text(constraints_text, encoding="utf-8")
        if previous is not None and not upgrade:
            (work / "requirements.txt").write_text(previous, encoding="utf-8")
        command = [
            uv, "pip", "compile", "--quiet", "--generate-hashes", "--no-header",
            "--python-version", PYTHON_VERSION, "--python-platform", PYTHON_PLATFORM,
            "--constraints", "constraints.txt", "--output-file", "requirements.txt", "roots.in",
        ]  # fmt: skip
        if upgrade:
            command.append("--upgrade")
        env = {**os.environ, "UV_NO_PROGRESS": "1", "NO_COLOR": "1"}
        try:
            proc = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise HashLockError(
                f"uv pip compile did not finish within {timeout:.0f} s (is the index reachable?)"
            ) from None
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-12:])
            raise HashLockError(f"uv pip compile could not resolve the tank's roots:\n{tail}")
        body = (work / "requirements.txt").read_text(encoding="utf-8")
    digest = hashlib.sha256(constraints_text.encode()).hexdigest()
    text = header(roots, constraints_source, digest) + body.lstrip("\n")
    parse_hashlock(text, "the compiled set")  # refuse to write what render would refuse to read
    return text
