"""What ``puffer tank push`` and ``pull`` will do, decided from what they were asked before the engine is.

A pull is either *verified* (by a digest: ``REPO@sha256:…`` or a pins file's final layer,
made the box's image under a local name) or *unverified* (a registry's tag, only to look at:
it keeps the registry's name). :func:`plan_pull` checks the options and says which, naming
the one at fault; :func:`run_pull` carries a plan out on an engine. The commands parse and print.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from puffer_core.tank.box.protocol import DEFAULT_IMAGE, image_reference
from puffer_core.tank.errors import TankError
from puffer_core.tank.registry.pins import LayerPin, read_pins
from puffer_core.tank.registry.pull import PullResult, pull_pinned, pull_unverified
from puffer_core.tank.registry.refs import RegistryRef, parse_digest, parse_local_tag, parse_registry, registry_of

__all__ = ["PullPlan", "PushPlan", "plan_pull", "plan_push", "run_pull"]


@dataclass(frozen=True)
class PushPlan:
    """An image to push and the repository it goes to."""

    image: str
    registry: RegistryRef


def plan_push(image: str, registry: str) -> PushPlan:
    """``push IMAGE --registry REG`` checked: a typo is one line before the engine is asked."""
    ref = parse_registry(registry)
    image_reference(image, "IMAGE")
    return PushPlan(image, ref)


@dataclass(frozen=True)
class PullPlan:
    """A verified pull (``digest``, made ``local``; the pins file's ``pin`` and ``lock`` checked too) or an
    unverified one (a tag: ``expected_lock``, the lock digest its label must say, when asked for)."""

    registry: RegistryRef
    verified: bool
    digest: str | None = None
    local: str | None = None
    pin: LayerPin | None = None
    lock: str | None = None
    expected_lock: str | None = None


def plan_pull(
    image: str | None,
    pins_path: pathlib.Path | None = None,
    registry: str | None = None,
    lock: str | None = None,
    local: str | None = None,
) -> PullPlan:
    """``pull REPO@sha256:DIGEST | --pins FILE | --registry REG [--lock DIGEST]`` checked, with ``--tag LOCAL``."""
    given = [name for name, value in (("IMAGE", image), ("--pins", pins_path), ("--registry", registry)) if value]
    if len(given) != 1:
        raise TankError(
            f"give one of REPO@sha256:DIGEST, --pins FILE or --registry REG ({', '.join(given) or 'none'} given); "
            "a box's image comes from a digest: puffer tank pull REPO@sha256:DIGEST"
        )
    if lock is not None and registry is None:
        raise TankError("--lock goes with --registry REG (a tag to look at); a digest pull needs no --lock")
    if registry is not None:
        if local is not None:
            raise TankError(
                "--tag: a pull by tag is unverified and gets no local name; pull REPO@sha256:DIGEST or --pins FILE"
            )
        expected = None if lock is None else parse_digest(lock)
        return PullPlan(parse_registry(registry), verified=False, expected_lock=expected)
    local = local or DEFAULT_IMAGE
    parse_local_tag(local)
    pins = None if pins_path is None else read_pins(pins_path)
    pin = None if pins is None else pins.layers["final"]
    wanted = image_reference(pin.ref if pin is not None else str(image), "IMAGE")
    if wanted.digest is None:
        raise TankError(
            f"{image!r} names no digest, and a tag names whatever was pushed to it last: give "
            "REPO@sha256:DIGEST as puffer tank push printed it, or --registry REG to look at a tag unverified"
        )
    return PullPlan(registry_of(wanted, "IMAGE"), verified=True, digest=wanted.digest, local=local, pin=pin,
                    lock=None if pins is None else pins.lock)  # fmt: skip


def run_pull(plan: PullPlan, client: Any, out: Callable[[str, str], None], box_image: str | None) -> PullResult:
    """Carry ``plan`` out on the engine ``client``; ``box_image``: the box's image, never replaced by a tag."""
    if not plan.verified:
        return pull_unverified(client, plan.registry, plan.expected_lock, out, box_image=box_image)
    assert plan.digest is not None and plan.local is not None
    return pull_pinned(client, plan.registry, plan.digest, plan.local, out, pin=plan.pin, lock=plan.lock)
