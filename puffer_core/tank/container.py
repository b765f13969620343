"""One's own PufferTank container: ``puffer tank shell`` and ``puffer tank run -- CMD``.

Both start the final layer with a folder (default: the checkout) mounted at ``/workspace``,
as the caller's uid:gid, so what is written there belongs to the caller on the host, with
the engine's GPUs when it has the NVIDIA runtime (and a line saying whether they were
passed, and why). They exec Docker's own client
(``docker run --rm ...``): it owns the terminal (TTY size, Ctrl-C, Ctrl-D), streams the
output and exits with the container's exit code, which no SDK session does as well.
The engine is asked first (through the SDK, as ``puffer tank build`` does) whether it
answers and holds the image, so those mistakes are one line naming the fix.

:func:`docker_argv` turns a :class:`RunRequest` into the command line; it is pure, and
tested without an engine.

Privileges: every container starts with ``--security-opt no-new-privileges`` (no setuid
binary or file capability can raise a process's privileges) and ``--cap-drop ALL``, and
no capability is added back by default, because nothing an RL dev shell does needs one:
the entrypoint only makes a HOME under the world-writable ``/tmp``, the work happens as
the caller's uid in files it owns (the mount) or may read (the image), and training,
environments, Multiprocessing's shared memory (a memfd), Ray's object store (``/dev/shm``) and the GPUs (the
NVIDIA runtime injects the devices from outside) need no capability. What is lost is what
root needs: with ``--user 0:0`` root cannot write files it does not own (no DAC_OVERRIDE),
chown them (CHOWN), or let apt drop to its sandbox user (SETUID, SETGID). ``--cap-add CAP``
gives one back for that session, e.g. ``--user 0:0 --cap-add CHOWN --cap-add DAC_OVERRIDE
--cap-add FOWNER --cap-add SETUID --cap-add SETGID`` for ``apt-get install``.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from puffer_core.tank.box.protocol import DEFAULT_IMAGE, KIND_LABEL, become, bind_mount, image_reference
from puffer_core.tank.engine import connect
from puffer_core.tank.errors import NoEngineError, TankError

__all__ = [
    "CAPABILITIES",
    "CONTAINER_LABEL",
    "DEFAULT_IMAGE",
    "WORKSPACE",
    "ContainerOptions",
    "GpuDecision",
    "RunRequest",
    "bind_mount",
    "check_capabilities",
    "docker_argv",
    "docker_client_path",
    "exec_docker",
    "gpu_decision",
    "parse_user",
    "prepare_run",
    "use_gpus",
    "workdir_for",
]

WORKSPACE = "/workspace"
#: Ray's object store keeps the observations it moves in /dev/shm (Multiprocessing uses a memfd
#: instead); Docker's default 64 MB is too small for a few hundred Atari frames.
DEFAULT_SHM = "1g"
GPU_MODES = ("auto", "all", "none")
FINAL_LABEL = "org.opencontainers.image.title"
#: Every container `shell` / `run` starts carries it (value: shell or run), so scripts and
#: tests find them (docker ps --filter label=org.puffer.tank.container).
CONTAINER_LABEL = KIND_LABEL
#: Linux capability names (capabilities(7)), as docker --cap-add takes them.
CAPABILITIES = frozenset(
    "AUDIT_CONTROL AUDIT_READ AUDIT_WRITE BLOCK_SUSPEND BPF CHECKPOINT_RESTORE CHOWN DAC_OVERRIDE "
    "DAC_READ_SEARCH FOWNER FSETID IPC_LOCK IPC_OWNER KILL LEASE LINUX_IMMUTABLE MAC_ADMIN MAC_OVERRIDE "
    "MKNOD NET_ADMIN NET_BIND_SERVICE NET_BROADCAST NET_RAW PERFMON SETFCAP SETGID SETPCAP SETUID "
    "SYS_ADMIN SYS_BOOT SYS_CHROOT SYS_MODULE SYS_NICE SYS_PACCT SYS_PTRACE SYS_RAWIO SYS_RESOURCE "
    "SYS_TIME SYS_TTY_CONFIG SYSLOG WAKE_ALARM".split()
)
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
    #: Capabilities given back after --cap-drop ALL (none by default; see the module docstring).
    cap_add: tuple[str, ...] = ()
    #: What the CONTAINER_LABEL says: "shell" or "run".
    kind: str = "run"


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


@dataclass(frozen=True)
class GpuDecision:
    """Whether the GPUs are passed to the container, and the reason, for the line the run prints."""

    passed: bool
    reason: str

    def line(self) -> str:
        return f"puffertank: GPUs {'passed (--gpus all)' if self.passed else 'not passed'}: {self.reason}"


def gpu_decision(mode: str, runtimes: Mapping[str, Any] | None) -> GpuDecision:
    """Pass the GPUs (``--gpus all``)? ``auto``: only when the engine has the NVIDIA runtime."""
    if mode not in GPU_MODES:
        raise TankError(f"--gpus {mode!r}: give one of {', '.join(GPU_MODES)}")
    names = ", ".join(sorted(runtimes or {})) or "none reported"
    has_nvidia = "nvidia" in (runtimes or {})
    if mode == "none":
        return GpuDecision(False, "--gpus none")
    if mode == "all":
        if has_nvidia:
            return GpuDecision(True, "--gpus all, and the engine has the NVIDIA runtime")
        return GpuDecision(
            True,
            f"--gpus all as asked, though the engine lists no NVIDIA runtime (runtimes: {names}); docker may refuse",
        )
    if has_nvidia:
        return GpuDecision(True, "the engine has the NVIDIA runtime (--gpus auto)")
    return GpuDecision(
        False, f"the engine has no NVIDIA runtime (runtimes: {names}); --gpus all forces them, --gpus none quiets this"
    )


def use_gpus(mode: str, runtimes: Mapping[str, Any] | None) -> bool:
    """Pass the GPUs (``--gpus all``)? ``auto``: when the engine has the NVIDIA runtime."""
    return gpu_decision(mode, runtimes).passed


def check_capabilities(names: Sequence[str]) -> tuple[str, ...]:
    """``--cap-add`` values as docker takes them (``chown`` and ``CAP_CHOWN`` mean CHOWN), sorted, unique."""
    found = set()
    for name in names:
        cap = name.strip().upper().removeprefix("CAP_")
        if cap == "ALL":
            raise TankError("--cap-add ALL would undo --cap-drop ALL; name the capabilities the session needs")
        if cap not in CAPABILITIES:
            raise TankError(
                f"--cap-add {name!r} is not a Linux capability (capabilities(7)); e.g. --cap-add CHOWN --cap-add SETUID"
            )
        found.add(cap)
    return tuple(sorted(found))


def workdir_for(mount: pathlib.Path, cwd: pathlib.Path) -> str:
    """Where to start inside: the working folder's place under the mount, else /workspace."""
    try:
        relative = cwd.resolve().relative_to(mount.resolve())
    except ValueError:
        return WORKSPACE
    return WORKSPACE if relative == pathlib.Path(".") else f"{WORKSPACE}/{relative.as_posix()}"


def docker_argv(request: RunRequest) -> list[str]:
    """The ``docker run`` command line for ``request`` (the image's entrypoint stays)."""
    argv = ["docker", "run", "--rm", "--init", "--interactive"]
    if request.tty:
        argv.append("--tty")
    uid, gid = request.user
    argv += ["--security-opt", "no-new-privileges", "--cap-drop", "ALL"]
    for cap in request.cap_add:
        argv += ["--cap-add", cap]
    argv += [
        "--label", f"{CONTAINER_LABEL}={request.kind}",
        "--user", f"{uid}:{gid}",
        "--mount", bind_mount(request.mount, WORKSPACE),
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
    return [*argv, "--", request.image, *request.command]  # "--": nothing after it is an option of docker


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


@dataclass(frozen=True)
class ContainerOptions:
    """What ``puffer tank shell`` and ``run`` were given: the options they share, unchecked."""

    image: str = DEFAULT_IMAGE
    mount: str | None = None
    user: str | None = None
    gpus: str = "auto"
    network: str | None = None
    shm_size: str = DEFAULT_SHM
    env: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    quiet: bool = False


def prepare_run(
    options: ContainerOptions, command: tuple[str, ...], tty: bool, kind: str, root_finder: Callable[[], pathlib.Path]
) -> tuple[RunRequest, str, GpuDecision]:
    """The checked request, the docker client's path and the GPU decision.

    The arguments are checked first, then the docker client, the engine and the image, so
    a typo is never hidden behind (or kept waiting by) a missing engine.
    """
    image_reference(options.image, "--image")
    user = parse_user(options.user)
    shm = check_shm_size(options.shm_size)
    env = check_env(options.env)
    caps = check_capabilities(options.cap_add)
    mount = check_mount(options.mount, root_finder)
    client_path = docker_client_path()
    client = connect()
    check_image(client, options.image)
    gpus = gpu_decision(options.gpus, client.info().get("Runtimes"))
    request = RunRequest(
        image=options.image,
        mount=mount,
        command=command,
        user=user,
        workdir=workdir_for(mount, pathlib.Path.cwd()),
        tty=tty,
        gpus=gpus.passed,
        network=options.network,
        shm_size=shm,
        env=env,
        quiet=options.quiet,
        cap_add=caps,
        kind=kind,
    )
    return request, client_path, gpus


def exec_docker(client_path: str, argv: list[str]) -> NoReturn:
    """Become ``docker run``: the terminal, signals and the exit code are then Docker's."""
    become(client_path, argv)
