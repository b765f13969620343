"""``puffer tank pull`` and ``build --from-registry``: an image from a registry, checked against what its tag names.

A ``lock-<sha256>`` tag names the lock digest of the image it holds; after the pull, the
digest is computed again from the image's own lock label and must be that one, or the
image is refused and removed from the engine (nothing half-trusted stays tagged). A
``latest`` pull prints the digest it read, to pin with ``--lock``. An ``inputs-<sha256>``
tag (``build --from-registry``) must hold a layer whose ``org.puffer.tank.inputs`` label
is that sha256. The registry's tag is removed after the check (unless it was on the engine
before): the image is known by its local tag.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from puffer_core.tank.errors import TankError
from puffer_core.tank.inputs import INPUTS_LABEL
from puffer_core.tank.lock import LOCK_LABEL, lock_digest, lock_hashes, parse_lock
from puffer_core.tank.registry import RegistryRef, inputs_tag, lock_tag, parse_local_tag
from puffer_core.tank.transfer import MissingTag, Printer, check_registry, has_tag, pull_tag, untag

__all__ = ["PullResult", "image_digest", "pull_image", "reuse_layer"]


@dataclass
class PullResult:
    """What one pull brought: the registry's tag, the local tag, the image id and its lock digest."""

    registry: str
    pulled: str
    image: str
    id: str
    digest: str
    seconds: float

    def record(self) -> dict[str, Any]:
        """The ``--json`` summary."""
        return {
            "registry": self.registry,
            "pulled": self.pulled,
            "image": self.image,
            "id": self.id,
            "digest": self.digest,
            "seconds": round(self.seconds, 1),
        }


def image_digest(image: Any, name: str) -> str:
    """The lock digest of ``image`` (named ``name``), from its lock label; TankError when it has none."""
    text = (image.labels or {}).get(LOCK_LABEL)
    if not text:
        raise TankError(f"{name} has no lock (label {LOCK_LABEL}), so nothing says what is in it")
    return lock_digest(parse_lock(text, f"the lock of {name}"), lock_hashes(text))


def _checked(image: Any, full: str, expected: str | None) -> str:
    """The image's lock digest when it is the one its tag names (any, for ``latest``)."""
    digest = image_digest(image, full)
    if expected is not None and digest != expected:
        raise TankError(f"its lock digest is {digest}, not {expected} as its tag says")
    return digest


def pull_image(client: Any, ref: RegistryRef, expected: str | None, local: str, out: Printer) -> PullResult:
    """Pull ``ref:lock-<expected>`` (or ``ref:latest``), check its lock digest, tag it ``local``."""
    repository, local_tag = parse_local_tag(local)
    tag = lock_tag(expected) if expected else "latest"
    full = ref.tag(tag)
    check_registry(ref)
    had = has_tag(client, full)
    started = time.monotonic()
    try:
        pull_tag(client, ref, tag, out)
    except MissingTag as exc:
        how = "push it from the box that built it (puffer tank push)" if expected else "push an image first"
        raise TankError(f"{exc}: {how}, or name another with --lock DIGEST") from None
    image = client.images.get(full)
    try:
        digest = _checked(image, full, expected)
    except TankError as exc:
        untag(client, full)  # a tag that lies about its image leaves nothing behind
        raise TankError(f"{full} is refused: {exc}; it was removed from this engine") from None
    image.tag(repository, local_tag)
    if not had:
        untag(client, full)
    return PullResult(str(ref), full, f"{repository}:{local_tag}", image.id, digest, time.monotonic() - started)


def reuse_layer(client: Any, ref: RegistryRef, stage: str, fingerprint: str, tag: str, out: Printer) -> bool:
    """Pull the layer built from ``fingerprint`` and tag it ``tag``; False (a note) when the registry has none."""
    full = ref.tag(inputs_tag(fingerprint))
    had = has_tag(client, full)
    try:
        pull_tag(client, ref, inputs_tag(fingerprint), out)
    except MissingTag:
        out("note", f"{stage}: {ref} has no layer built from these inputs (inputs-{fingerprint[:12]}…): building it")
        return False
    image = client.images.get(full)
    found = (image.labels or {}).get(INPUTS_LABEL)
    if found != fingerprint:
        untag(client, full)
        raise TankError(
            f"{full} is refused: its layer was built from inputs {found or 'it does not record'}, not the ones its "
            "tag names; it was removed from this engine"
        )
    name, _, version = tag.rpartition(":")
    image.tag(name, version)
    if not had:
        untag(client, full)
    out("note", f"{stage}: reused from {ref} (inputs-{fingerprint[:12]}…) as {tag} = {image.id[:19]}")
    return True
