"""A pins file: what ``puffer tank push --pins FILE`` pushed, each layer named by its manifest digest.

The digest is the trust anchor. A registry's tag names whatever was pushed to it last, and
a label is text anyone can write into an image; a manifest digest names bytes, and the
engine checks every byte it pulls by digest against it. So ``puffer tank pull --pins
FILE`` and ``puffer tank build --from-registry REG --pins FILE`` pull by these digests only,
and the file is what an admin hands from the box that pushed to the boxes that pull (check
it into the fleet's inventory, or copy it): whoever can write it chooses the image.

The file (JSON, written whole)::

    {"generated_by": "puffer tank push --pins", "format": 1,
     "registry": "127.0.0.1:5000/puffertank", "image": "puffertank:latest", "lock": "<lock sha256>",
     "layers": {"base": {"ref": "127.0.0.1:5000/puffertank@sha256:…", "digest": "sha256:…",
                         "id": "sha256:…", "inputs": "<inputs sha256>"}, "envs": {…}, "final": {…}}}

``id`` is the image id (the config's digest: the same on every engine that pulls the
manifest), ``inputs`` what the layer was built from (:mod:`~puffer_core.tank.image.inputs`), the
key ``build --from-registry`` looks a layer up by.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from puffer_core.atomic import write_atomically
from puffer_core.specs.images import image_reference_problem, parse_image_reference
from puffer_core.tank.errors import TankError

__all__ = ["FORMAT", "STAGES", "LayerPin", "Pins", "read_pins", "write_pins"]

FORMAT = 1
STAGES = ("base", "envs", "final")
#: A pins file is a few hundred bytes; anything much larger is not one.
MAX_BYTES = 64 * 1024
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class LayerPin:
    """One pushed layer: its repository, manifest digest, image id and inputs fingerprint."""

    repository: str
    digest: str
    id: str
    inputs: str | None = None

    @property
    def ref(self) -> str:
        """``REPOSITORY@sha256:…``: what the engine pulls, checking every byte."""
        return f"{self.repository}@{self.digest}"

    def record(self) -> dict[str, Any]:
        return {"ref": self.ref, "digest": self.digest, "id": self.id, "inputs": self.inputs}


@dataclass
class Pins:
    """What one push pinned: the registry repository, the final image's name and lock digest, each layer."""

    registry: str
    image: str
    lock: str
    layers: dict[str, LayerPin] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {
            "generated_by": "puffer tank push --pins",
            "format": FORMAT,
            "registry": self.registry,
            "image": self.image,
            "lock": self.lock,
            "layers": {stage: self.layers[stage].record() for stage in STAGES if stage in self.layers},
        }

    def by_inputs(self, fingerprint: str) -> LayerPin | None:
        """The pinned layer built from ``fingerprint``, None when none is."""
        return next((pin for pin in self.layers.values() if pin.inputs == fingerprint), None)


def write_pins(path: str | os.PathLike, pins: Pins) -> None:
    """Write ``pins`` to ``path`` whole (a crash leaves the old file or the new one)."""
    write_atomically(path, (json.dumps(pins.record(), indent=2) + "\n").encode("utf-8"))


def _bad(path: str, why: str) -> TankError:
    return TankError(f"{path} is not a pins file: {why}; write one with puffer tank push --registry REG --pins FILE")


def _field(data: dict, key: str, pattern: re.Pattern | None, path: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        raise _bad(path, f"{where}{key} is {value!r}")
    return value


def _layer(stage: str, data: object, path: str) -> LayerPin:
    if not isinstance(data, dict):
        raise _bad(path, f"layers.{stage} is not an object")
    where = f"layers.{stage}."
    ref = _field(data, "ref", None, path, where)
    digest = _field(data, "digest", _SHA256, path, where)
    problem = image_reference_problem(ref)
    if problem is not None:
        raise _bad(path, f"{where}ref {ref!r} {problem}")
    parsed = parse_image_reference(ref)
    if parsed.digest != digest or parsed.tag is not None:
        raise _bad(path, f"{where}ref {ref!r} is not REPOSITORY@{digest}")
    inputs = data.get("inputs")
    if inputs is not None and (not isinstance(inputs, str) or not _HEX.fullmatch(inputs)):
        raise _bad(path, f"{where}inputs is {inputs!r}")
    return LayerPin(parsed.name, digest, _field(data, "id", _SHA256, path, where), inputs)


def read_pins(path: str | os.PathLike) -> Pins:
    """The pins file at ``path``; TankError naming the file and what is wrong with it."""
    shown = os.fspath(path)
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise TankError(f"cannot read the pins file {shown}: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise _bad(shown, f"it is larger than {MAX_BYTES // 1024} KiB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad(shown, f"not JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(data, dict):
        raise _bad(shown, "not a JSON object")
    if data.get("format") != FORMAT:
        raise _bad(shown, f"format {data.get('format')!r}, this puffer-core reads format {FORMAT}")
    layers = data.get("layers")
    if not isinstance(layers, dict) or "final" not in layers or set(layers) - set(STAGES):
        raise _bad(shown, f"layers must name the final layer and only {', '.join(STAGES)}")
    pins = Pins(
        registry=_field(data, "registry", None, shown, ""),
        image=_field(data, "image", None, shown, ""),
        lock=_field(data, "lock", _HEX, shown, ""),
    )
    for stage in STAGES:
        if stage in layers:
            pins.layers[stage] = _layer(stage, layers[stage], shown)
    return pins
