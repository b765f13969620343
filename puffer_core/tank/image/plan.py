"""What ``puffer tank build`` will do, decided once from what it was asked: a :class:`BuildPlan`.

As ``puffer train`` resolves its run plan before anything runs, the build's options are
checked (a typo is the one line printed, before the engine is asked), the plugins selected,
the lock read, the base image chosen (the lock's, unless given), the registry and its pins
paired, the build arguments gathered with this machine's, and each plugin's sources found.
The command only parses its options, prints what :func:`plan_build` noted, connects and
builds.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from puffer_core.tank.box.protocol import image_reference
from puffer_core.tank.errors import TankError
from puffer_core.tank.image.base_image import IMAGE_ID
from puffer_core.tank.image.build import STAGES, BuildPlan, image_tags
from puffer_core.tank.image.build_args import machine_build_args
from puffer_core.tank.image.lock import read_build_lock
from puffer_core.tank.image.render import DEFAULT_COMMAND, DEFAULT_OUTPUT, find_root
from puffer_core.tank.image.selection import Selection, select
from puffer_core.tank.image.sources import resolve_sources, source_options
from puffer_core.tank.registry.pins import Pins, read_pins
from puffer_core.tank.registry.refs import RegistryRef, parse_registry

__all__ = ["BuildRequest", "Note", "plan_build"]

#: ``note(kind, text)``: a line for the person building; kind ``note`` (worth reading) or ``dim`` (for the record).
Note = Callable[[str, str], None]


@dataclass(frozen=True)
class BuildRequest:
    """``puffer tank build``'s options as given (``build_args`` parsed, ``extra_args`` the ``--NAME-source`` ones)."""

    stage: str = "all"
    tag: str = "puffertank"
    base_image: str | None = None
    torch: str | None = None
    no_torch: bool = False
    ca_cert: pathlib.Path | None = None
    network: str | None = None
    plugins: str | None = None
    without: str | None = None
    constraints_path: pathlib.Path | None = None
    no_constraints: bool = False
    requirements_path: pathlib.Path | None = None
    no_cache: bool = False
    build_args: Mapping[str, str] = field(default_factory=dict)
    lock_path: pathlib.Path | None = None
    from_registry: str | None = None
    pins_path: pathlib.Path | None = None
    extra_args: tuple[str, ...] = ()


def plan_build(request: BuildRequest, note: Note) -> tuple[BuildPlan, Selection]:
    """The plan for ``request`` and the selection it builds; TankError naming the option at fault."""
    root = find_root()
    given_sources = source_options(list(request.extra_args))
    # The arguments first: a typo should not wait for (or be hidden by) the engine.
    if request.no_torch and request.torch:
        raise TankError("give --torch REQUIREMENT or --no-torch, not both")
    stages = STAGES if request.stage == "all" else (request.stage,)
    tags = image_tags(request.tag)
    registry, pins = _from_registry(request.from_registry, request.pins_path)
    base_image = request.base_image
    if base_image is not None and not IMAGE_ID.match(base_image):
        image_reference(base_image, "--base-image")
    lock = None if request.lock_path is None else read_build_lock(request.lock_path, request.network, root)
    if base_image is None and lock is not None and lock.base_image is not None and "base" in stages:
        base_image = lock.base_image
        note("dim", f"layer 1 starts from the lock's base image {base_image}")
    selection = select(
        root, request.plugins, request.without, request.constraints_path, request.no_constraints,
        need_constraints="envs" in stages, requirements_path=request.requirements_path,
    )  # fmt: skip
    for warning in selection.warnings:
        note("warning", warning)
    sources = resolve_sources(selection.layers, given_sources) if "envs" in stages else {}
    args, notes = machine_build_args()
    args.update(request.build_args)
    for line in notes:
        note("dim", line)
    if "envs" in stages and selection.command == DEFAULT_COMMAND and not selection.is_committed(root):
        note("note", f"{DEFAULT_OUTPUT} is not what the installed plugins render; building the fresh render "
                     "(commit it after `nox -s tank`)")  # fmt: skip
    plan = BuildPlan(
        root=root, stages=stages, tags=tags, layers=selection.layers, constraints=selection.constraints,
        hashlock=selection.hashlock, base_image=base_image, torch="" if request.no_torch else request.torch,
        ca_cert=request.ca_cert, network=request.network, no_cache=request.no_cache, build_args=args,
        render_command=selection.command, lock=lock, from_registry=registry, pins=pins,
        from_pins=str(request.pins_path or ""), sources=sources,
    )  # fmt: skip
    return plan, selection


def _from_registry(given: str | None, pins_path: pathlib.Path | None) -> tuple[RegistryRef | None, Pins | None]:
    """``--from-registry`` and ``--pins``, both or neither: a layer is taken only by a pinned digest."""
    registry = None if given is None else parse_registry(given)  # a typo first: it is the one line to fix
    if (given is None) != (pins_path is None):
        raise TankError(
            "--from-registry REG and --pins FILE go together: a layer is taken from the registry only by the "
            "digest the pins file (puffer tank push --pins) gives for its inputs, never by a tag or a label"
        )
    if registry is None or pins_path is None:
        return None, None
    return registry, read_pins(pins_path)
