"""``puffer tank pull`` and ``build --from-registry``: images from a registry, trusted by digest only.

A manifest digest names bytes, and the engine checks every byte it pulls by digest against
it. So ``puffer tank pull REPO@sha256:…`` (or the final layer of ``--pins FILE``,
:mod:`~puffer_core.tank.registry.pins`) is *verified*: what arrives is what was pushed, and it gets
the local name ``--tag`` (default ``puffertank:latest``, the image a box's logins start).

A pull by tag (``--registry REG [--lock DIGEST]``) pulls to look, nothing more: a tag names
whatever was pushed to it last, and a lock label is text anyone who can push writes. It
says *unverified*, keeps only the registry's own name (never ``--tag``), refuses to pull a
tag that is the box's image (``/etc/puffertank/image``), and prints the digest the registry
served, to compare with the one ``puffer tank push`` printed. Its lock label is still read,
and a label that contradicts its ``lock-<sha256>`` tag is refused and removed, since that
catches mistakes (though never an attacker).

``build --from-registry REG --pins FILE`` takes a layer only when the pins file maps that
layer's inputs fingerprint to a digest, and pulls it by that digest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.inputs import INPUTS_LABEL
from puffer_core.tank.image.lock import LOCK_LABEL, lock_digest, lock_hashes, parse_lock
from puffer_core.tank.registry.pins import LayerPin, Pins
from puffer_core.tank.registry.refs import RegistryRef, lock_tag, parse_local_tag
from puffer_core.tank.registry.transfer import MissingTag, Printer, check_registry, has_tag, pull_tag, untag

__all__ = ["PullResult", "image_digest", "pull_pinned", "pull_unverified", "reuse_layer"]


@dataclass
class PullResult:
    """What one pull brought: what was pulled, under which local name, the image id and its lock digest."""

    registry: str
    pulled: str
    image: str
    id: str
    digest: str
    seconds: float
    #: Pulled by digest: the engine checked every byte against it.
    verified: bool
    #: ``REPO@sha256:…``: the manifest the registry served.
    served: str | None = None

    def record(self) -> dict[str, Any]:
        """The ``--json`` summary."""
        return {
            "registry": self.registry,
            "pulled": self.pulled,
            "image": self.image,
            "id": self.id,
            "digest": self.digest,
            "verified": self.verified,
            "served": self.served,
            "seconds": round(self.seconds, 1),
        }


def image_digest(image: Any, name: str) -> str:
    """The lock digest of ``image`` (named ``name``), from its lock label; TankError when it has none."""
    text = (image.labels or {}).get(LOCK_LABEL)
    if not text:
        raise TankError(f"{name} has no lock (label {LOCK_LABEL}), so nothing says what is in it")
    return lock_digest(parse_lock(text, f"the lock of {name}"), lock_hashes(text))


def _served(image: Any, ref: RegistryRef) -> str | None:
    """``REPO@sha256:…`` of ``image`` in ``ref``'s repository, as the engine recorded the pull."""
    return next((name for name in image.attrs.get("RepoDigests") or [] if name.startswith(f"{ref.repository}@")), None)


def _same_image(image: Any, pin: LayerPin) -> bool:
    """The pulled image is the pinned one: its id is the pin's (the config digest, or the manifest's
    on an engine whose image store names images by their manifest)."""
    return image.id in (pin.id, pin.digest)


def _pull_by_digest(client: Any, ref: RegistryRef, digest: str, out: Printer) -> Any:
    """Pull ``ref@digest`` (the engine checks the bytes) and return the image."""
    check_registry(ref)
    try:
        pull_tag(client, ref, digest, out)
    except MissingTag as exc:
        raise TankError(f"{exc}: the digest is not in that repository (pushed elsewhere, or deleted)") from None
    return client.images.get(ref.tag(digest))


def pull_pinned(
    client: Any,
    ref: RegistryRef,
    manifest: str,
    local: str,
    out: Printer,
    pin: LayerPin | None = None,
    lock: str | None = None,
) -> PullResult:
    """Pull ``ref@manifest`` (a ``sha256:…`` manifest digest), the engine checking every byte, and name it ``local``.

    ``pin``/``lock``: what a pins file says of it (its image id, its lock digest), checked too.
    """
    repository, local_tag = parse_local_tag(local)
    started = time.monotonic()
    pulled = _pull_by_digest(client, ref, manifest, out)
    full = ref.tag(manifest)
    try:
        if pin is not None and not _same_image(pulled, pin):
            raise TankError(f"its image id is {pulled.id}, not {pin.id} as the pins file says")
        digest = image_digest(pulled, full)
        if lock is not None and digest != lock:
            raise TankError(f"its lock digest is {digest}, not {lock} as the pins file says")
    except TankError as exc:
        untag(client, full)
        raise TankError(f"{full} is refused: {exc}; it was removed from this engine") from None
    pulled.tag(repository, local_tag)
    return PullResult(
        str(ref), full, f"{repository}:{local_tag}", pulled.id, digest, time.monotonic() - started, True, full
    )


def pull_unverified(
    client: Any, ref: RegistryRef, expected: str | None, out: Printer, box_image: str | None = None
) -> PullResult:
    """Pull ``ref:lock-<expected>`` (or ``ref:latest``) to look at it: the registry's name only, unverified."""
    tag = lock_tag(expected) if expected else "latest"
    full = ref.tag(tag)
    if box_image is not None and full == box_image:
        raise TankError(
            f"{full} is this box's image (/etc/puffertank/image): a pull by tag would change it unverified; "
            f"pull it by digest: puffer tank pull {ref}@sha256:DIGEST (the digest puffer tank push printed)"
        )
    check_registry(ref)
    started = time.monotonic()
    try:
        pull_tag(client, ref, tag, out)
    except MissingTag as exc:
        how = "push it from the box that built it (puffer tank push)" if expected else "push an image first"
        raise TankError(f"{exc}: {how}, or name another with --lock DIGEST") from None
    image = client.images.get(full)
    try:
        digest = image_digest(image, full)
        if expected is not None and digest != expected:
            raise TankError(f"its lock digest is {digest}, not {expected} as its tag says")
    except TankError as exc:
        untag(client, full)  # a tag that contradicts its own image leaves nothing behind
        raise TankError(f"{full} is refused: {exc}; it was removed from this engine") from None
    return PullResult(str(ref), full, full, image.id, digest, time.monotonic() - started, False, _served(image, ref))


def reuse_layer(
    client: Any, ref: RegistryRef, stage: str, fingerprint: str, tag: str, out: Printer, pins: Pins, source: str
) -> bool:
    """Pull the layer ``pins`` (read from ``source``) pins for ``fingerprint``, by digest, and tag it ``tag``.

    False (a note) when no pinned layer was built from these inputs, or the registry lost it.
    """
    pin = pins.by_inputs(fingerprint)
    if pin is None:
        out(
            "note", f"{stage}: {source} pins no layer built from these inputs (inputs {fingerprint[:12]}…): building it"
        )
        return False
    full = ref.tag(pin.digest)
    had = has_tag(client, full)
    try:
        image = _pull_by_digest(client, ref, pin.digest, out)
    except TankError as exc:
        out("note", f"{stage}: the pinned layer cannot be pulled ({exc}): building it")
        return False
    found = (image.labels or {}).get(INPUTS_LABEL)
    if found != fingerprint or not _same_image(image, pin):
        if not had:
            untag(client, full)
        raise TankError(
            f"{full} is refused: {source} pins it for inputs {fingerprint[:12]}… and image {pin.id[:19]}, but it "
            f"was built from inputs {(found or 'it does not record')[:12]}… as image {image.id[:19]}; "
            "it was removed from this engine"
        )
    name, _, version = tag.rpartition(":")
    image.tag(name, version)
    out("note", f"{stage}: reused {full} (pinned in {source}, verified by its digest) as {tag} = {image.id[:19]}")
    return True
