"""``puffer tank login``: a box's login shell that lands each user in their own PufferTank.

A user whose login shell is ``puffertank-login`` (``tank/setup-host.sh --user NAME``) gets,
on every ssh or ``su -`` session, a shell in one long-lived container of their own,
``puffertank-<user>``: made on the first login from the box's current image
(``/etc/puffertank/image``, else ``puffertank:latest``), with the home mounted at the same
path, as the same uid:gid, every capability dropped and no new privileges (as ``puffer
tank shell``), and restarted with the engine (``--restart unless-stopped``: a box that was
hard-reset gives the same container back). Later sessions join it with ``docker exec``. A
command (``ssh box CMD``, ``su - user -c CMD``, scp's and rsync's servers, editors' remote
servers) runs inside, stdin and stdout passed through untouched. ``puffer tank login
--fresh`` (also as ``ssh box puffer tank login --fresh``) replaces the container with a new
one from the current image; the home is kept.

Only the standard library and the docker CLI are used here, because this runs on every
ssh command of every user: it must start in a fraction of a second.
"""

from __future__ import annotations

import dataclasses
import grp
import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from puffer_core.specs.images import image_reference_problem
from puffer_core.tank.container import bind_mount
from puffer_core.tank.errors import NoEngineError, TankError
from puffer_core.tank.registry import image_reference

__all__ = [
    "IMAGE_FILE",
    "LOGIN_LABEL",
    "LoginRequest",
    "box_image",
    "container_name",
    "create_argv",
    "login",
    "main",
    "parse_args",
    "session_argv",
]

#: The box's current image: one tag, written by tank/setup-host.sh --image (or the admin).
IMAGE_FILE = "/etc/puffertank/image"
DEFAULT_IMAGE = "puffertank:latest"
#: On every login container; the value is the owner's uid, so another's container is refused.
LOGIN_LABEL = "org.puffer.tank.login"
KIND_LABEL = "org.puffer.tank.container"
#: The terminal and locale a session keeps; the rest of the host's environment stays out.
PASSED_ENV = ("TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY")
#: What `ssh box puffer tank login --fresh` sends: handled on the host, not inside.
SELF_COMMAND = ("puffer", "tank", "login")
#: docker CLI calls other than the session (inspect, run -d, start) give up after this.
DOCKER_TIMEOUT = 120.0
_NAME = re.compile(r"^[a-z_][a-z0-9_.-]{0,30}\$?$", re.IGNORECASE)
USAGE = """usage: puffertank-login [--fresh] [--image TAG] [-c COMMAND [ARG...]]
       puffer tank login [--fresh] [--image TAG] [-c COMMAND]

A box's login shell: lands you in your own long-lived PufferTank container
(puffertank-USER, your home mounted, your uid), made from the box's image on first use.
  -c COMMAND    run COMMAND inside (what ssh, su -c, scp and rsync send), then leave
  --fresh       replace your container with a new one from the box's current image
                (everything outside your home is reset); also: ssh BOX puffer tank login --fresh
  --image TAG   the image for a new container (default: /etc/puffertank/image, else puffertank:latest)
  -l, --login   accepted and ignored (a login shell is always a login)
"""


@dataclass(frozen=True)
class LoginRequest:
    """Who logs in, into what, to do what."""

    user: str
    uid: int
    gid: int
    group: str
    home: str
    image: str
    fresh: bool = False
    #: A shell command to run inside (``-c``), None for an interactive login shell.
    command: str | None = None
    #: ``$0 $1 ...`` of ``-c COMMAND ARG...``, as a shell takes them.
    command_args: tuple[str, ...] = ()
    tty: bool = False
    cwd: str = ""
    network: str = "host"

    @property
    def name(self) -> str:
        return container_name(self.user)


def container_name(user: str) -> str:
    """``puffertank-<user>``, refused for a name docker could not take."""
    name = f"puffertank-{user}"
    if not re.match(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$", name):
        raise TankError(f"user name {user!r} cannot name a container (letters, digits, _ . - only)")
    return name


def box_image(path: str = IMAGE_FILE) -> str:
    """The box's current image: the first word of ``path``, else ``puffertank:latest``."""
    try:
        with open(path, encoding="utf-8") as file:
            words = file.read().split()
    except FileNotFoundError:
        return DEFAULT_IMAGE
    except OSError as exc:
        raise TankError(f"cannot read the box's image from {path}: {exc.strerror}") from None
    if not words:
        return DEFAULT_IMAGE
    problem = image_reference_problem(words[0])
    if problem is not None:
        raise TankError(
            f"the box's image in {path}, {words[0][:80]!r}, {problem}: the admin fixes it (setup-host.sh --image)"
        )
    return words[0]


@dataclass(frozen=True)
class LoginArgs:
    """The login's own arguments, shell-style (what sshd, su and usermod -s give a shell)."""

    fresh: bool = False
    image: str | None = None
    command: str | None = None
    command_args: tuple[str, ...] = ()
    help: bool = False


def parse_args(argv: Sequence[str]) -> LoginArgs:
    """``[-l] [--fresh] [--image TAG] [-c COMMAND [ARG...]]``; anything else is a one-line error."""
    args = LoginArgs()
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        if word in ("-l", "--login"):
            continue
        if word in ("-h", "--help"):
            return dataclasses.replace(args, help=True)
        if word == "--fresh":
            args = dataclasses.replace(args, fresh=True)
        elif word == "--image" or word.startswith("--image="):
            value = word.partition("=")[2] if "=" in word else (rest.pop(0) if rest else "")
            if not value.strip():
                raise TankError("--image needs a tag, e.g. --image puffertank:latest")
            args = dataclasses.replace(args, image=value.strip())
        elif word == "-c":
            if not rest:
                raise TankError("-c needs a command, e.g. -c 'nvidia-smi'")
            return dataclasses.replace(args, command=rest[0], command_args=tuple(rest[1:]))
        else:
            raise TankError(f"{word!r} is not an option of puffertank-login (see --help)")
    return args


def self_command(command: str | None) -> LoginArgs | None:
    """``puffer tank login [--fresh] ...`` sent as the command (``ssh box puffer tank login --fresh``)."""
    if command is None:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if tuple(words[:3]) != SELF_COMMAND:
        return None
    return parse_args(words[3:])


def request_for(args: LoginArgs, environ: Mapping[str, str], image_file: str = IMAGE_FILE) -> LoginRequest:
    """The request of the calling user; ``SSH_ORIGINAL_COMMAND`` stands for ``-c`` under sshd's ForceCommand."""
    if args.image is not None:
        image_reference(args.image, "--image")
    entry = pwd.getpwuid(os.getuid())
    try:
        group = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        group = entry.pw_name
    command = args.command
    if command is None and environ.get("SSH_ORIGINAL_COMMAND"):
        command = environ["SSH_ORIGINAL_COMMAND"]
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = entry.pw_dir
    home = entry.pw_dir.rstrip("/") or "/"
    inside_home = cwd == home or cwd.startswith(home + "/")
    return LoginRequest(
        user=entry.pw_name,
        uid=entry.pw_uid,
        gid=entry.pw_gid,
        group=group,
        home=home,
        image=args.image or box_image(image_file),
        fresh=args.fresh,
        command=command,
        command_args=args.command_args if args.command is not None else (),
        tty=sys.stdin.isatty() and sys.stdout.isatty(),
        cwd=cwd if inside_home else home,
    )


# -- the docker command lines (pure) ------------------------------------------------------------


def create_argv(request: LoginRequest, gpus: bool = False) -> list[str]:
    """``docker run --detach ...``: the user's long-lived container, idle until a session joins."""
    argv = ["run", "--detach", "--init", "--name", request.name]
    argv += ["--label", f"{KIND_LABEL}=login", "--label", f"{LOGIN_LABEL}={request.uid}"]
    argv += ["--security-opt", "no-new-privileges", "--cap-drop", "ALL"]
    argv += [
        "--user",
        f"{request.uid}:{request.gid}",
        "--mount",
        bind_mount(request.home, request.home),
        "--workdir",
        request.home,
    ]
    argv += ["--env", f"HOME={request.home}", "--env", f"USER={request.user}", "--env", f"LOGNAME={request.user}"]
    # The image's entrypoint prints its banner only into the container's log; keep that quiet.
    argv += ["--env", "PUFFERTANK_QUIET=1", "--hostname", "puffertank", "--shm-size", "1g"]
    # Host networking: Ray's ports, TensorBoard and a notebook answer on the box's own address.
    argv += ["--network", request.network, "--restart", "unless-stopped"]
    if gpus:
        argv += ["--gpus", "all"]
    return [*argv, "--", request.image, "sleep", "infinity"]


def session_argv(request: LoginRequest, environ: Mapping[str, str]) -> list[str]:
    """``docker exec ...``: a login shell, or the command, inside the user's container."""
    argv = ["exec", "--interactive"]
    if request.tty:  # only with a terminal at both ends: scp's and rsync's byte streams stay untouched
        argv.append("--tty")
    argv += ["--workdir", request.cwd]
    for key in sorted(environ):
        if key in PASSED_ENV or key.startswith("LC_"):
            argv += ["--env", f"{key}={environ[key]}"]
    argv += ["--", request.name]
    if request.command is None:
        return [*argv, "bash", "-l"]
    return [*argv, "bash", "-c", request.command, *request.command_args]


#: Run as root inside a new container, once: a passwd and group entry for the user, so that
#: `id -un`, the prompt, ssh and git know the name (root owns those files: no capability needed).
ACCOUNT_SCRIPT = (
    'grep -q "^$1:" /etc/passwd || echo "$1:x:$2:$3::$4:/bin/bash" >> /etc/passwd; '
    'cut -d: -f3 /etc/group | grep -qx "$3" || echo "$5:x:$3:" >> /etc/group'
)


# -- the engine, through the docker CLI -----------------------------------------------------------


class DockerCli:
    """The ``docker`` client of this box, with each failure turned into one line naming the fix."""

    def __init__(self, user: str, path: str | None = None) -> None:
        self.user = user
        self.path = path or shutil.which("docker") or ("/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "")
        if not self.path:
            raise NoEngineError(
                "the docker command is not installed on this box: "
                "the admin runs tank/setup-host.sh (or apt install docker.io)"
            )

    def run(self, args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(
                [self.path, *args], capture_output=True, text=True, timeout=DOCKER_TIMEOUT, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise NoEngineError(
                f"docker {args[0]} did not answer within {DOCKER_TIMEOUT:.0f} s: is the engine stuck?"
            ) from None
        if check and proc.returncode != 0:
            raise self.error(proc.stderr, args[0])
        return proc

    def error(self, stderr: str, verb: str) -> TankError:
        """The one line a failed docker call becomes."""
        text = " ".join(stderr.split())
        if "Cannot connect to the Docker daemon" in text or "Is the docker daemon running" in text:
            return NoEngineError("no Docker engine answers on this box: the admin starts it (systemctl start docker)")
        if "permission denied" in text and "docker" in text.lower() and ".sock" in text:
            return NoEngineError(
                f"{self.user} may not use this box's Docker engine (permission denied on its socket): "
                f"the admin enrols users with tank/setup-host.sh --user {self.user}"
            )
        return TankError(f"docker {verb} failed: {text[:300] or 'no message'}")

    def inspect(self, kind: str, name: str) -> dict | None:
        """``docker KIND inspect NAME`` as a dict, None when there is no such object."""
        proc = self.run([kind, "inspect", "--", name], check=False)
        if proc.returncode != 0:
            if "No such" in proc.stderr or "no such" in proc.stderr:
                return None
            raise self.error(proc.stderr, f"{kind} inspect")
        found = json.loads(proc.stdout or "[]")
        return found[0] if found else None


def check_owner(found: dict, request: LoginRequest) -> None:
    """Refuse a container of the login's name that is not this user's login container."""
    labels = (found.get("Config") or {}).get("Labels") or {}
    runs_as = (found.get("Config") or {}).get("User") or "root"
    if labels.get(LOGIN_LABEL) != str(request.uid) or runs_as != f"{request.uid}:{request.gid}":
        owner = f"label {LOGIN_LABEL}={labels[LOGIN_LABEL]}" if LOGIN_LABEL in labels else f"no {LOGIN_LABEL} label"
        raise TankError(
            f"a container named {request.name} exists on this box but is not {request.user}'s login container "
            f"({owner}, runs as {runs_as}): an admin removes or renames it (docker rm -f {request.name})"
        )


def check_image(docker: DockerCli, request: LoginRequest) -> None:
    """The image a new container is made from is on this box, or one line saying how to get it."""
    if docker.inspect("image", request.image) is None:
        raise TankError(
            f"no image {request.image} on this box (the box's image, {IMAGE_FILE}): the admin gets one with "
            "puffer tank pull --registry HOST/NAME, or builds it with puffer tank build"
        )


def ensure_container(docker: DockerCli, request: LoginRequest, say) -> None:
    """The user's container, running: made from the box's image if missing (or ``--fresh``)."""
    found = docker.inspect("container", request.name)
    if found is not None:
        check_owner(found, request)
        if request.fresh:
            check_image(docker, request)  # before the old one goes: a failed --fresh leaves it as it was
            docker.run(["rm", "--force", "--", request.name])
            say(f"replaced {request.name}: a new container from {request.image} (your home is kept)")
            found = None
        elif not (found.get("State") or {}).get("Running"):
            docker.run(["start", "--", request.name])
            return
        else:
            return
    if not os.path.isdir(request.home):
        raise TankError(
            f"{request.user}'s home {request.home} does not exist on this box: the admin makes it (mkhomedir)"
        )
    check_image(docker, request)
    runtimes = docker.run(["info", "--format", "{{json .Runtimes}}"], check=False).stdout
    proc = docker.run(create_argv(request, gpus='"nvidia"' in runtimes), check=False)
    if proc.returncode != 0:
        if "is already in use" in proc.stderr:  # another session made it first: join that one
            check_owner(docker.inspect("container", request.name) or {}, request)
            return
        raise docker.error(proc.stderr, "run")
    account = [request.user, str(request.uid), str(request.gid), request.home, request.group]
    docker.run(["exec", "--user", "0", "--", request.name, "sh", "-c", ACCOUNT_SCRIPT, "sh", *account])


def login(args: LoginArgs, environ: Mapping[str, str] | None = None, image_file: str = IMAGE_FILE) -> NoReturn:
    """Make sure the container is there and running, then become ``docker exec`` into it."""
    environ = os.environ if environ is None else environ
    if os.path.exists("/.dockerenv") and environ.get("PUFFERTANK"):
        raise TankError(
            "you are inside your PufferTank already: to replace it, leave and run ssh BOX puffer tank login --fresh"
        )
    request = request_for(args, environ, image_file)
    again = self_command(request.command)
    if again is not None:  # `ssh box puffer tank login --fresh [-c CMD]`: this login's own options
        request = request_for(dataclasses.replace(again, image=again.image or args.image), {}, image_file)
    docker = DockerCli(request.user)
    ensure_container(docker, request, lambda line: print(f"puffertank: {line}", file=sys.stderr))
    argv = [docker.path, *session_argv(request, environ)]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(docker.path, argv)
    except OSError as exc:
        raise TankError(f"cannot start {docker.path}: {exc.strerror}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """``puffertank-login``: the login shell's entry point (argv[0] may be ``-puffertank-login``)."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if args.help:
            print(USAGE, end="")
            return 0
        login(args)
    except TankError as exc:
        print(f"puffertank-login: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
