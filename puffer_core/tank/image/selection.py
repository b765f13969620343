"""What a render or a build of layer 2 is made from: the plugins' layers, the constraint set, its hash-locked form.

Shared by ``puffer tank render`` and ``puffer tank build``: the selection (``--plugins``,
``--without``), the constraint set (``--constraints`` or the default, or none), the
hash-locked set checked to pin it (``--requirements``), and the command that reproduces
the render, which the generated file names in its header.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

from puffer_core.plugins import get_plugins
from puffer_core.specs.declarations import DockerLayer
from puffer_core.tank.errors import TankError
from puffer_core.tank.image.hashlock import DEFAULT_HASHLOCK, HashLock, HashLockError, load_hashlock
from puffer_core.tank.image.lock import local_projects
from puffer_core.tank.image.render import (
    DEFAULT_COMMAND,
    DEFAULT_CONSTRAINTS,
    DEFAULT_OUTPUT,
    Constraints,
    load_constraints,
    plugin_layers,
    render_envs,
    select_layers,
)

__all__ = ["Selection", "installed_layers", "select", "shown_path"]


def shown_path(path: pathlib.Path, root: pathlib.Path) -> str:
    """``path`` as messages and the render name it: relative to the checkout when inside it."""
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)


@dataclass
class Selection:
    """The layers chosen, the constraint set, its hash-locked form, and the command that renders them."""

    layers: dict[str, DockerLayer]
    constraints: Constraints
    hashlock: HashLock | None
    command: str
    #: Plugins whose DockerLayer could not be used (printed once the selection stands).
    warnings: list[str] = field(default_factory=list)

    def render(self) -> str:
        """tank/Dockerfile.envs as this selection renders it."""
        return render_envs(self.layers, self.constraints, hashlock=self.hashlock, command=self.command)

    def is_committed(self, root: pathlib.Path) -> bool:
        """Whether the checkout's tank/Dockerfile.envs is what this selection renders."""
        committed = root / DEFAULT_OUTPUT
        return committed.is_file() and committed.read_text(encoding="utf-8") == self.render()


def installed_layers() -> tuple[dict[str, DockerLayer], list[str]]:
    """Every installed plugin's DockerLayer, and warnings for those that could not be used."""
    return plugin_layers(get_plugins())


def _names(value: str) -> str:
    return ",".join(sorted({p.strip() for p in value.split(",") if p.strip()}))


def select(
    root: pathlib.Path,
    plugins: str | None,
    without: str | None,
    constraints_path: pathlib.Path | None,
    no_constraints: bool,
    output: str | None = None,
    need_constraints: bool = True,
    requirements_path: pathlib.Path | None = None,
) -> Selection:
    """The selection the options ask for, every file checked; the command names the options that differ."""
    if constraints_path is not None and no_constraints:
        raise TankError("give --constraints PATH or --no-constraints, not both")
    if requirements_path is not None and no_constraints:
        raise TankError(
            "give --requirements PATH or --no-constraints, not both: the hash-locked set pins the constraints"
        )
    layers, warnings = installed_layers()
    chosen = select_layers(layers, plugins, without)

    parts = ["puffer tank render"]
    if plugins is not None:
        parts.append(f"--plugins {_names(plugins)}")
    if without is not None:
        parts.append(f"--without {_names(without)}")
    hashlock = None
    if no_constraints:
        constraints = Constraints.none()
        parts.append("--no-constraints")
    elif constraints_path is not None:
        shown = shown_path(constraints_path, root)
        constraints = load_constraints(constraints_path, shown)
        if shown != DEFAULT_CONSTRAINTS:
            parts.append(f"--constraints {shown}")
    elif need_constraints:
        constraints = load_constraints(root / DEFAULT_CONSTRAINTS, DEFAULT_CONSTRAINTS)
    else:
        constraints = Constraints.none()
    if constraints.source is not None:
        hashlock = _hashlock(root, requirements_path, constraints, chosen)
        if hashlock.path != DEFAULT_HASHLOCK:
            parts.append(f"--requirements {hashlock.path}")
    if output not in (None, "-", DEFAULT_OUTPUT):
        parts.append(f"--output {output}")
    command = DEFAULT_COMMAND if len(parts) == 1 else " ".join(parts)
    return Selection(chosen, constraints, hashlock, command, warnings)


def _hashlock(root: pathlib.Path, path: pathlib.Path | None, constraints: Constraints, layers: dict) -> HashLock:
    """The hash-locked set to render with, checked to pin the constraint set and the plugins' pip needs."""
    path = root / DEFAULT_HASHLOCK if path is None else path
    shown = shown_path(path, root)
    if pathlib.PurePath(shown).is_absolute():
        raise HashLockError(
            f"--requirements {path}: give a file inside the checkout ({root}); layer 2 copies it from "
            "the build context, which is the checkout"
        )
    hashlock = load_hashlock(path, shown)
    hashlock.check_covers(constraints.lines, layers, local_projects(root), constraints.source or "")
    return hashlock
