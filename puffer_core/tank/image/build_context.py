"""What each layer's build is sent: only the files its Dockerfile copies, as a reproducible tar.

Not the whole checkout: a tar with fixed owners, times and order, so the same files give
the same bytes and the engine's layer cache hits whenever they did not change.
"""

from __future__ import annotations

import io
import pathlib
import tarfile
from collections.abc import Iterable, Mapping

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.render import CA_HELPER_SOURCE
from puffer_core.tank.image.sources import source_files

__all__ = ["DOCKERFILES", "build_context", "layer_context"]

DOCKERFILES = {"base": "tank/Dockerfile.base", "envs": "tank/Dockerfile.envs", "final": "tank/Dockerfile"}
#: Files and folders never sent to the engine.
EXCLUDED_NAMES = {
    "__pycache__",
    ".git",
    ".nox",
    ".venv",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    "build",
    "dist",
    "node_modules",
}
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info")


def _wanted(path: pathlib.Path) -> bool:
    parts = path.parts
    if parts[:1] == ("plugins",) and len(parts) > 2 and parts[2] == "tests":
        return False  # a plugin's tests do not run in the tank; leaving them out spares rebuilds
    return not any(part in EXCLUDED_NAMES or part.endswith(EXCLUDED_SUFFIXES) for part in parts)


def _tree(root: pathlib.Path, relative: str) -> list[str]:
    top = root / relative
    if top.is_file():
        return [relative]
    if not top.is_dir():
        raise TankError(f"{relative} is missing from {root}; the build context needs it")
    files = []
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not path.is_symlink() and _wanted(rel):
            files.append(rel.as_posix())
    return files


def build_context(
    root: pathlib.Path,
    paths: Iterable[str],
    extra: Mapping[str, bytes] | None = None,
    files: Mapping[str, pathlib.Path] | None = None,
) -> io.BytesIO:
    """A reproducible tar of ``paths`` (files or folders under ``root``) plus ``extra`` files.

    ``files``: more files from anywhere, by their name in the tar (a stage source's).
    Owners, times and order are fixed, so the same files give the same bytes.
    """
    members: dict[str, bytes | pathlib.Path] = {}
    for relative in paths:
        for name in _tree(root, relative):
            members[name] = root / name
    members.update(files or {})
    for name, data in (extra or {}).items():
        members[name] = data
    dirs = sorted({parent.as_posix() for name in members for parent in pathlib.PurePosixPath(name).parents} - {"."})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name in sorted(members):
            source = members[name]
            if isinstance(source, pathlib.Path):
                data = source.read_bytes()
                # The owner's execute bit (what git records), not os.access: root may execute any file
                # with one x bit, so the same checkout would pack other bytes for root and for a user.
                mode = 0o755 if source.stat().st_mode & 0o100 else 0o644
            else:
                data, mode = source, 0o644
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def layer_context(
    root: pathlib.Path,
    stage: str,
    plugin_names: list[str],
    envs_dockerfile: str = "",
    hashlock_path: str | None = None,
    sources: Mapping[str, pathlib.Path] | None = None,
) -> io.BytesIO:
    """The context of one layer: its Dockerfile and the files it copies.

    Layer 2's Dockerfile is ``envs_dockerfile`` (rendered for this build, not read from the
    checkout), with the hash-locked set at ``hashlock_path`` and the build stages' sources
    (``{name: folder}``, see :mod:`~puffer_core.tank.image.sources`); layer 3 copies the core and
    the plugins in ``plugin_names`` from the checkout.
    """
    helpers = [CA_HELPER_SOURCE]
    if stage == "base":
        return build_context(root, [DOCKERFILES["base"], *helpers])
    if stage == "envs":
        if hashlock_path is not None:
            helpers.append(hashlock_path)
        files = {}
        for name, folder in sorted((sources or {}).items()):
            files.update(source_files(name, folder))
        return build_context(root, helpers, {DOCKERFILES["envs"]: envs_dockerfile.encode()}, files)
    missing = [name for name in plugin_names if not (root / "plugins" / name / "pyproject.toml").is_file()]
    if missing:
        raise TankError(
            f"plugin(s) {', '.join(missing)} have no plugins/<name>/pyproject.toml in {root}; "
            "layer 3 installs plugins from this checkout"
        )
    paths = [
        DOCKERFILES["final"],
        "tank/puffertank-bashrc.sh",
        "tank/puffertank-entrypoint.sh",
        "tank/puffertank-deps.py",
        *helpers,
        "pyproject.toml",
        "LICENSE",  # pyproject.toml's license-files: the installed puffer-core carries it
        "puffer_core",
        *[f"plugins/{name}" for name in plugin_names],
    ]
    extra = {}
    if (root / "README.md").is_file():
        paths.append("README.md")
    else:
        extra["README.md"] = b"# puffer-core\n"
    return build_context(root, paths, extra)
