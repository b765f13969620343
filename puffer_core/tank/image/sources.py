"""The folders build stages take from the user (``BuildStage.sources``): named, verified, packed.

A plugin whose build stage compiles something the build cannot download (DeepMind Lab: no
network to its code host here, and a GPL source this repository never holds) declares a
:class:`~puffer_core.StageSource`. ``puffer tank build --NAME DIR`` (or the variable
``PUFFER_NAME``, e.g. ``PUFFER_DMLAB_SOURCE``) names the folder; before anything reaches
the engine, a missing folder is refused in one line saying how to get it, and the plugin's
``verify`` checks a given one (DeepMind Lab: the commit). The folder's files (every regular
file; ``.git`` folders and symlinks left out) go into layer 2's build context under
``tank/sources/NAME/``, which the rendered Dockerfile copies into the stage.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable, Mapping

from puffer_core.specs.declarations import SOURCE_NAME_RE, DockerLayer, StageSource
from puffer_core.tank.errors import TankError
from puffer_core.tank.image.render import source_in_context

__all__ = ["declared_sources", "resolve_sources", "source_files", "source_options"]

#: Folders never packed from a source: a checkout's history is not what the stage builds.
SKIPPED_DIRS = {".git"}


def declared_sources(layers: Mapping[str, DockerLayer]) -> list[tuple[str, str, StageSource]]:
    """Every source of the layers' build stages, as ``(plugin, stage name, source)``."""
    return [
        (plugin, stage.name, source)
        for plugin, layer in sorted(layers.items())
        for stage in layer.stages
        for source in stage.sources
    ]


def source_options(args: Iterable[str]) -> dict[str, str]:
    """``--NAME DIR`` / ``--NAME=DIR`` pairs (NAME ending in ``-source``) of the build's extra arguments.

    Anything else is refused: a typo of another option must not pass silently.
    """
    found: dict[str, str] = {}
    items = list(args)
    index = 0
    while index < len(items):
        item = items[index]
        option, sep, value = item.partition("=")
        name = option[2:] if option.startswith("--") else ""
        if not SOURCE_NAME_RE.match(name):
            raise TankError(f"no such option: {item} (see puffer tank build --help)")
        if not sep:
            index += 1
            if index >= len(items) or items[index].startswith("--"):
                raise TankError(f"{option} needs a folder: {option} DIR")
            value = items[index]
        found[name] = value
        index += 1
    return found


def resolve_sources(
    layers: Mapping[str, DockerLayer], given: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, pathlib.Path]:
    """``{source name: folder}`` for every source the layers' stages take, each checked.

    From ``given`` (the build's ``--NAME DIR`` options), else the variable ``PUFFER_NAME``.
    A source no selected stage takes is refused, as is a missing folder (the message says
    how to get it) or one the plugin's ``verify`` finds wrong.
    """
    environ = os.environ if environ is None else environ
    declared = declared_sources(layers)
    known = {source.name for _, _, source in declared}
    unknown = sorted(set(given) - known)
    if unknown:
        takes = ", ".join(f"--{name}" for name in sorted(known)) or "none"
        raise TankError(
            f"--{unknown[0]}: no selected plugin's build stage takes that source (the selection takes: {takes})"
        )
    found: dict[str, pathlib.Path] = {}
    for plugin, stage, source in declared:
        value = given.get(source.name) or environ.get(source.env_var) or ""
        where = f"{source.option} {value}" if source.name in given else f"{source.env_var}={value}"
        if not value:
            raise TankError(
                f"plugin {plugin}'s build stage {stage} needs {source.option} DIR (or {source.env_var}): "
                f"{source.how_to_get}"
            )
        folder = pathlib.Path(value).expanduser()
        if not folder.is_dir():
            raise TankError(f"{where}: no such folder. {source.how_to_get}")
        problem = source.verify(folder) if source.verify is not None else None
        if problem:
            raise TankError(f"{where}: {problem}")
        found[source.name] = folder.resolve()
    return found


def source_files(name: str, folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """The source's regular files by their name in the build context (``tank/sources/NAME/...``)."""
    prefix = source_in_context(name)
    files: dict[str, pathlib.Path] = {}
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not os.path.islink(os.path.join(top, d)))
        for file_name in names:
            path = pathlib.Path(top, file_name)
            if path.is_file() and not path.is_symlink():
                files[f"{prefix}/{path.relative_to(folder).as_posix()}"] = path
    return files
