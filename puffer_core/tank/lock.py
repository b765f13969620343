"""The image says what is in it: PufferTank's lock of every Python package in the image.

Layer 3 (``tank/Dockerfile``) writes ``/opt/puffertank/lock.txt`` at build time: a short
header, the Python version, then ``pip list --format=freeze`` (every installed
distribution with its resolved version). ``puffer tank build`` copies that text into the
final image's ``org.puffer.tank.lock`` label, so ``puffer tank lock IMAGE`` reads it from
the engine without starting a container, and two machines compare one digest.

``puffer tank build --lock FILE`` rebuilds under a lock: the lock, minus the checkout's own
projects (installed from source, at whatever version the checkout says), is served to the
build like the CA bundle and joins ``PIP_CONSTRAINT`` in every pip step of the three layers.
"""

from __future__ import annotations

import hashlib
import io
import pathlib
import re
import tarfile
from typing import Any

from puffer_core.tank.errors import TankError

__all__ = [
    "LOCK_IN_IMAGE",
    "LOCK_LABEL",
    "build_constraints",
    "canonical",
    "image_lock",
    "label_lock",
    "local_projects",
    "lock_digest",
    "parse_lock",
    "read_lock",
]

LOCK_LABEL = "org.puffer.tank.lock"
LOCK_IN_IMAGE = "/opt/puffertank/lock.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def canonical(name: str) -> str:
    """PEP 503 name: ``Foo_Bar`` and ``foo-bar`` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str, source: str = "the lock") -> dict[str, str]:
    """``{canonical name: version}`` of a lock's ``name==version`` lines (``#`` lines skipped)."""
    packages: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise TankError(
                f"{source} line {number}: {line[:80]!r} is not NAME==VERSION; "
                "give a lock printed by `puffer tank lock IMAGE`"
            )
        packages[canonical(match.group(1))] = match.group(2)
    if not packages:
        raise TankError(
            f"{source} names no package (NAME==VERSION lines); give a lock printed by `puffer tank lock IMAGE`"
        )
    return packages


def lock_digest(packages: dict[str, str]) -> str:
    """SHA-256 of the sorted ``name==version`` lines: equal digests, equal environments."""
    text = "".join(f"{name}=={packages[name]}\n" for name in sorted(packages))
    return hashlib.sha256(text.encode()).hexdigest()


def local_projects(root: pathlib.Path) -> set[str]:
    """Canonical names of the projects the checkout installs from source (core and plugins)."""
    from puffer_core.matrix.sources import read_pyproject  # tomllib, or a fallback on Python 3.10

    names = set()
    for path in [root / "pyproject.toml", *sorted((root / "plugins").glob("*/pyproject.toml"))]:
        if path.is_file():
            name = read_pyproject(path).get("project", {}).get("name")
            if name:
                names.add(canonical(name))
    return names


def build_constraints(text: str, local: set[str], source: str) -> bytes:
    """The pip constraint file a build under ``text`` uses: its pins minus the local projects."""
    packages = parse_lock(text, source)
    lines = [f"# PufferTank build constraints from {pathlib.PurePath(source).name} (puffer tank build --lock)"]
    lines += [f"{name}=={version}" for name, version in sorted(packages.items()) if name not in local]
    return ("\n".join(lines) + "\n").encode()


def image_lock(client: Any, image: str) -> tuple[str, Any]:
    """The lock text in ``image``'s label and the image; TankError naming the fix otherwise."""
    import docker

    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise TankError(
            f"image {image} is not on this engine: build it (puffer tank build) or name one that is{_listing(client)}"
        ) from None
    text = (found.labels or {}).get(LOCK_LABEL)
    if not text:
        raise TankError(
            f"image {image} has no lock (label {LOCK_LABEL}): only final layers built by `puffer tank build` "
            "carry one; rebuild it with puffer tank build --stage final"
        )
    return text, found


def _listing(client: Any) -> str:
    """``; images with a lock here: a, b`` (or nothing): what the user can name instead."""
    try:
        images = client.images.list(filters={"label": LOCK_LABEL})
    except Exception:  # a listing is a courtesy; the error above stands without it
        return ""
    tags = sorted(tag for image in images for tag in image.tags)
    return f"; images with a lock here: {', '.join(tags[:8])}" if tags else ""


def read_lock(client: Any, image_id: str) -> str:
    """``/opt/puffertank/lock.txt`` of a just-built image (a throw-away container, no network)."""
    out = client.containers.run(
        image_id, [LOCK_IN_IMAGE], entrypoint=["cat"], network_mode="none", remove=True, stdout=True, stderr=False
    )
    return out.decode("utf-8")


def label_lock(client: Any, image_id: str, tag: str, text: str) -> str:
    """Tag ``image_id`` plus the lock label as ``tag``: a LABEL adds metadata, no layer."""
    buffer = io.BytesIO()
    dockerfile = f"FROM {image_id}\n".encode()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mtime = len(dockerfile), 0
        tar.addfile(info, io.BytesIO(dockerfile))
    buffer.seek(0)
    import docker

    try:
        image, _ = client.images.build(
            fileobj=buffer, custom_context=True, tag=tag, labels={LOCK_LABEL: text}, rm=True, pull=False
        )
    except docker.errors.BuildError as exc:
        raise TankError(f"labelling {tag} with its lock failed: {exc.msg}") from None
    return image.id
