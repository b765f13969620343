"""``puffer tank push``: a final image and the two layers it was built on, to a registry, each pinned by digest.

Each layer's result is its manifest digest, printed as ``REPO@sha256:…`` (and written to
``--pins FILE``, :mod:`~puffer_core.tank.registry.pins`): the one name another box can trust, since
the engine checks every byte it pulls by digest. The tags are for people browsing the
registry, never for trust: the final layer is tagged ``lock-<sha256>`` (its lock digest,
``puffer tank lock``), the layers under it ``lock-<sha256>-envs`` and ``lock-<sha256>-base``,
and ``latest``, ``latest-envs`` and ``latest-base`` move last, once everything else is up.
The registry's tags are made on the engine for the push and removed after (those that
were not there before): the box keeps its own names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.inputs import BELOW_LABEL, INPUTS_LABEL
from puffer_core.tank.image.lock import image_lock, lock_digest, lock_hashes, parse_lock
from puffer_core.tank.registry.pins import LayerPin, Pins
from puffer_core.tank.registry.refs import RegistryRef, lock_tag
from puffer_core.tank.registry.transfer import Printer, check_registry, has_tag, push_tag, untag

__all__ = ["PushResult", "image_layers", "push_image", "push_tags"]

#: Lower layers first: their blobs are then already in the registry when the layers above go.
ORDER = ("base", "envs", "final")


@dataclass
class PushResult:
    """What one push sent: the lock digest, every tag pushed, each layer's image id and pin."""

    registry: str
    image: str
    digest: str
    tags: list[str] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)
    pins: Pins | None = None
    seconds: float = 0.0

    def record(self) -> dict[str, Any]:
        """The ``--json`` summary."""
        pins = {} if self.pins is None else {stage: pin.ref for stage, pin in self.pins.layers.items()}
        return {
            "registry": self.registry,
            "image": self.image,
            "digest": self.digest,
            "pins": pins,
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


def push_tags(digest: str) -> list[tuple[str, str]]:
    """(stage, tag) in the order pushed: each layer's lock tag, then the ``latest`` ones."""
    tags = [(stage, lock_tag(digest, stage)) for stage in ORDER]
    return tags + [(stage, "latest" if stage == "final" else f"latest-{stage}") for stage in ORDER]


def _pin(ref: RegistryRef, stage: str, layer: Any, pushed: str, full: str) -> LayerPin:
    """The pin of one pushed layer, from the manifest digest the registry reported for it."""
    if not pushed.startswith("sha256:"):
        raise TankError(f"the registry reported no manifest digest for {full} ({pushed or 'nothing'}): try again")
    return LayerPin(ref.repository, pushed, layer.id, (layer.labels or {}).get(INPUTS_LABEL))


def push_image(client: Any, image: str, ref: RegistryRef, out: Printer) -> PushResult:
    """Push ``image`` (a final layer with a lock) and its two lower layers to ``ref``."""
    started = time.monotonic()
    text, final = image_lock(client, image)
    digest = lock_digest(parse_lock(text, f"the lock of {image}"), lock_hashes(text))
    layers = image_layers(client, image, final)
    check_registry(ref)
    pins = Pins(str(ref), image, digest)
    result = PushResult(str(ref), image, digest, layers={stage: layers[stage].id for stage in ORDER}, pins=pins)
    made: list[str] = []
    try:
        for stage, tag in push_tags(digest):
            full = ref.tag(tag)
            if not has_tag(client, full):
                made.append(full)
            layers[stage].tag(ref.repository, tag)
            out("stage", f"{stage}: {full}")
            pushed = push_tag(client, ref, tag, out)
            result.tags.append(full)
            if stage not in pins.layers:  # its lock tag's push: the latest tags carry the same image
                pins.layers[stage] = _pin(ref, stage, layers[stage], pushed, full)
                out("done", f"{stage}: {pins.layers[stage].ref}")
    finally:
        for full in made:  # the registry's names are not the box's: leave none behind, pushed or not
            untag(client, full)
    result.seconds = time.monotonic() - started
    return result
