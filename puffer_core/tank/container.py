"""One's own PufferTank container: ``puffer tank shell`` and ``puffer tank run -- CMD``.

Both start the final layer with a folder (default: the checkout) mounted at ``/workspace``,
as the caller's uid:gid, so what is written there belongs to the caller on the host, with
the engine's GPUs when it has the NVIDIA runtime. They exec Docker's own client
(``docker run --rm ...``): it owns the terminal (TTY size, Ctrl-C, Ctrl-D), streams the
output and exits with the container's exit code, which no SDK session does as well.
The engine is asked first (through the SDK, as ``puffer tank build`` does) whether it
answers and holds the image, so those mistakes are one line naming the fix.

:func:`docker_argv` turns a :class:`RunRequest` into the command line; it is pure, and
tested without an engine.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from puffer_core.tank.errors import NoEngineError, TankError

__all__ = [
    "DEFAULT_IMAGE",
    "WORKSPACE",
    "RunRequest",
    "docker_argv",
    "docker_client_path",
    "parse_user",
    "use_gpus",
    "workdir_for",
]

DEFAULT_IMAGE = "puffertank:latest"
WORKSPACE = "/workspace"
#: The vector backends share observation buffers through /dev/shm; Docker's default 64 MB
#: is too small for a few hundred Atari frames.
DEFAULT_SHM = "1g"
GPU_MODES = ("auto", "all", "none")
FINAL_LABEL = "org.opencontainers.image.title"
_USER = re.compile(r"^(\d{1,10})(?::(\d{1,10}))?$")
_SIZE = re.compile(r"^\d+[bkmg]?$", re.IGNORECASE)


@dataclass(frozen=True)
class RunRequest:
    """Everything ``docker run`` needs to start one PufferTank container."""

    image: str
    mount: pathlib.Path
    command: tuple[str, ...] = ()
    user: tuple[int, int] = (0, 0)
    workdir: str = WORKSPACE
    tty: bool = False
    gpus: bool = False
    network: str | None = None
    shm_size: str = DEFAULT_SHM
    env: tuple[str, ...] = ()
    quiet: bool = False


def parse_user(text: str | None) -> tuple[int, int]:
    """``UID[:GID]`` as numbers (GID defaults to UID); None: the calling user's."""
    if text is None:
        return os.getuid(), os.getgid()
    match = _USER.match(text.strip())
    if match is None or int(match.group(1)) >= 2**32 or int(match.group(2) or 0) >= 2**32:
        raise TankError(
            f"--user {text!r} is not UID:GID: give numbers, e.g. --user 1000:1000 "
            f"(default: the caller's, {os.getuid()}:{os.getgid()})"
        )
    uid = int(match.group(1))
    return uid, int(match.group(2) if match.group(2) is not None else uid)


def check_shm_size(text: str) -> str:
    """Docker's size syntax (``512m``, ``2g``), refused here rather than by ``docker run``."""
    if not _SIZE.match(text.strip()):
        raise TankError(f"--shm-size {text!r} is not a size: give bytes or a number with b, k, m or g, e.g. 2g")
    return text.strip().lower()


def check_env(pairs: Sequence[str]) -> tuple[str, ...]:
    """``KEY=VALUE`` pairs for ``docker run --env``."""
    for pair in pairs:
        key, sep, _ = pair.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise TankError(f"--env {pair!r} is not KEY=VALUE (e.g. --env PUFFER_DEBUG=1)")
    return tuple(pairs)


def use_gpus(mode: str, runtimes: Mapping[str, Any] | None) -> bool:
    """Pass the GPUs (``--gpus all``)? ``auto``: when the engine has the NVIDIA runtime."""
    if mode not in GPU_MODES:
        raise TankError(f"--gpus {mode!r}: give one of {', '.join(GPU_MODES)}")
    if mode == "auto":
        return "nvidia" in (runtimes or {})
    return mode == "all"


def workdir_for(mount: pathlib.Path, cwd: pathlib.Path) -> str:
    """Where to start inside: the working folder's place under the mount, else /workspace."""
    try:
        relative = cwd.resolve().relative_to(mount.resolve())
    except ValueError:
        return WORKSPACE
    return WORKSPACE if relative == pathlib.Path(".") else f"{WORKSPACE}/{relative.as_posix()}"


def _bind(source: pathlib.Path) -> str:
    """``--mount`` value; the source is a CSV field, quoted so commas and colons are plain."""
    field = f"source={source}".replace('"', '""')
    return f'type=bind,"{field}",target={WORKSPACE}'


def docker_argv(request: RunRequest) -> list[str]:
    """The ``docker run`` command line for ``request`` (the image's entrypoint stays)."""
    argv = ["docker", "run", "--rm", "--init", "--interactive"]
    if request.tty:
        argv.append("--tty")
    uid, gid = request.user
    argv += [
        "--user", f"{uid}:{gid}",
        "--mount", _bind(request.mount),
        "--workdir", request.workdir,
        "--shm-size", request.shm_size,
        "--hostname", "puffertank",
    ]  # fmt: skip
    if request.gpus:
        argv += ["--gpus", "all"]
    if request.network:
        argv += ["--network", request.network]
    if request.quiet:
        argv += ["--env", "PUFFERTANK_QUIET=1"]
    for pair in request.env:
        argv += ["--env", pair]
    return [*argv, request.image, *request.command]


def docker_client_path() -> str:
    """The ``docker`` client on PATH, or NoEngineError saying how to get it."""
    path = shutil.which("docker")
    if path is None:
        raise NoEngineError(
            "the docker command-line client is not on PATH: puffer tank shell/run start containers with "
            "`docker run`; install it (Debian/Ubuntu: apt install docker.io) or add it to PATH"
        )
    return path


def check_mount(mount: str | None, root_finder: Any) -> pathlib.Path:
    """The folder to mount: ``--mount DIR`` (must exist), else the checkout holding the cwd."""
    if mount is None:
        try:
            return root_finder()
        except TankError:
            raise TankError(
                f"{pathlib.Path.cwd()} is not inside a puffer-core checkout: run from one, "
                "or give the folder to mount with --mount DIR"
            ) from None
    path = pathlib.Path(mount).expanduser()
    if not path.exists():
        raise TankError(f"--mount {mount}: no such folder; give an existing folder (default: the checkout)")
    if not path.is_dir():
        raise TankError(f"--mount {mount} is a file, not a folder; give the folder holding it")
    return path.resolve()


def check_image(client: Any, image: str) -> None:
    """TankError naming the PufferTank images the engine has, when ``image`` is not there."""
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        finals = client.images.list(filters={"label": f"{FINAL_LABEL}=PufferTank"})  # layer 3's own label
        tags = sorted(tag for found in finals for tag in found.tags)
        have = f"; PufferTank images here: {', '.join(tags[:8])}" if tags else ""
        raise TankError(
            f"image {image} is not on this engine: build it with puffer tank build, or give --image TAG{have}"
        ) from None
