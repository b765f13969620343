"""``puffer tank push``: a final image and the two layers it was built on, to a registry, named by what is inside.

The final layer is tagged ``lock-<sha256>`` (its lock digest: ``puffer tank lock``), the
layers under it ``lock-<sha256>-envs`` and ``lock-<sha256>-base``; each layer also
``inputs-<sha256>`` (what it was built from, :mod:`~puffer_core.tank.inputs`), for
``puffer tank build --from-registry``. ``latest``, ``latest-envs`` and ``latest-base`` move
last, once everything else is up. The registry's tags are made on the engine for the push
and removed after (those that were not there before): the box keeps its own names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from puffer_core.tank.errors import TankError
from puffer_core.tank.inputs import BELOW_LABEL, INPUTS_LABEL
from puffer_core.tank.lock import image_lock, lock_digest, lock_hashes, parse_lock
from puffer_core.tank.registry import RegistryRef, inputs_tag, lock_tag
from puffer_core.tank.transfer import Printer, check_registry, has_tag, push_tag, untag

__all__ = ["PushResult", "image_layers", "push_image", "push_tags"]

#: Lower layers first: their blobs are then already in the registry when the layers above go.
ORDER = ("base", "envs", "final")


@dataclass
class PushResult:
    """What one push sent: the lock digest, every tag pushed, each layer's image id."""

    registry: str
    image: str
    digest: str
    tags: list[str] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def record(self) -> dict[str, Any]:
        """The ``--json`` summary."""
        return {
            "registry": self.registry,
            "image": self.image,
            "digest": self.digest,
            "tags": self.tags,
            "layers": self.layers,
            "seconds": round(self.seconds, 1),
        }


def image_layers(client: Any, image: str, final: Any) -> dict[str, Any]:
    """The final image and the envs and base layers under it (each layer's ``org.puffer.tank.below``)."""
    import docker

    layers = {"final": final}
    for stage, below in (("final", "envs"), ("envs", "base")):
        below_id = (layers[stage].labels or {}).get(BELOW_LABEL)
        if not below_id:
            raise TankError(
                f"{image}: its {stage} layer does not name the layer it was built on (label {BELOW_LABEL}): "
                "it was built before `puffer tank push` existed; rebuild it with puffer tank build"
            )
        try:
            layers[below] = client.images.get(below_id)
        except docker.errors.ImageNotFound:
            raise TankError(
                f"{image} was built on the {below} layer {below_id[:19]}, which is not on this engine (a pulled "
                "image brings its final layer only); push from the box that built it"
            ) from None
    return layers


def push_tags(digest: str, layers: dict[str, Any]) -> list[tuple[str, str]]:
    """(stage, tag) in the order pushed: each layer's lock and inputs tags, then the ``latest`` ones."""
    tags = []
    for stage in ORDER:
        tags.append((stage, lock_tag(digest, stage)))
        inputs = (layers[stage].labels or {}).get(INPUTS_LABEL)
        if inputs:
            tags.append((stage, inputs_tag(inputs)))
    tags += [(stage, "latest" if stage == "final" else f"latest-{stage}") for stage in ORDER]
    return tags


def push_image(client: Any, image: str, ref: RegistryRef, out: Printer) -> PushResult:
    """Push ``image`` (a final layer with a lock) and its two lower layers to ``ref``."""
    started = time.monotonic()
    text, final = image_lock(client, image)
    digest = lock_digest(parse_lock(text, f"the lock of {image}"), lock_hashes(text))
    layers = image_layers(client, image, final)
    check_registry(ref)
    result = PushResult(str(ref), image, digest, layers={stage: layers[stage].id for stage in ORDER})
    made: list[str] = []
    try:
        for stage, tag in push_tags(digest, layers):
            full = ref.tag(tag)
            if not has_tag(client, full):
                made.append(full)
            layers[stage].tag(ref.repository, tag)
            out("stage", f"{stage}: {full}")
            push_tag(client, ref, tag, out)
            result.tags.append(full)
    finally:
        for full in made:  # the registry's names are not the box's: leave none behind, pushed or not
            untag(client, full)
    result.seconds = time.monotonic() - started
    return result
