"""The broker: the one root-owned program between a shared box's users and its Docker engine.

The engine is root-equivalent, so no user holds it: users are in group ``puffertank``, not
``docker``, and one sudo rule (``/etc/sudoers.d/puffertank``, written by
``tank/setup-host.sh``) lets that group run this program as root and nothing else. It does a
fixed set of things, for the calling user only (taken from sudo's ``SUDO_UID``, never from
an argument):

    session [--container NAME] [--fresh] [--tty] [--cwd DIR] [--env KEY=VALUE]... [--image REF]
            [-c COMMAND [ARG...]]        start or join one of the caller's containers, run a shell or COMMAND
    list [--json]                        the caller's containers and their limits
    stop NAME | rm NAME                  stop or remove one of them (NAME ``default`` is puffertank-USER)

Anything else is refused in one line. The broker runs as ``python -I`` (no
``PYTHONPATH``, no user site, not the working folder); it reads nothing of its environment
but ``SUDO_UID``, calls ``/usr/bin/docker`` by absolute path with an environment of its own
and a root-owned ``DOCKER_CONFIG`` (no CLI plugin or credential helper from anyone's home),
takes images only from the box's image file and the admin's allow-list, and sets every
docker option itself: the caller's uid:gid, the caller's own home only (a directory the
caller owns, in folders only root can write), every capability dropped, no new
privileges, the GPUs when the engine has the NVIDIA runtime, and the box's limits
(:mod:`puffer_core.tank.box.limits`: memory, swap, processes, CPU share per tank, tanks per user).

Which container belongs to whom is root's record, not a label: the broker writes
``<state>/<container id>.json`` when it makes a container, and joins, starts, stops or
removes only a container whose id it recorded for the caller. Its configuration
(:class:`BrokerConfig`) is fixed by the root-owned script that runs it, never by the caller.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from puffer_core.specs.images import image_reference_problem, parse_image_reference
from puffer_core.tank.box.limits import LimitsError, TankLimits, box_limits, format_size
from puffer_core.tank.box.ownership import Ownership
from puffer_core.tank.box.protocol import (
    ALLOWED_FILE,
    BROKER_PATH,
    DEFAULT,
    DEFAULT_IMAGE,
    DOCKER,
    DOCKER_CONFIG,
    ENV_KEY_RE,
    ENV_VALUE_RE,
    GROUP,
    IMAGE_FILE,
    KIND_LABEL,
    LIMITS_FILE,
    LOGIN_LABEL,
    NAME_LABEL,
    NAME_RE,
    STATE_DIR,
    become,
    bind_mount,
)
from puffer_core.tank.errors import BrokerError, TankError

__all__ = ["BrokerConfig", "BrokerError", "Caller", "Request", "caller_of", "main", "parse_request"]

MAX_ARGS = 4096
MAX_ARG_BYTES = 128 * 1024
SAFE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
DOCKER_TIMEOUT = 120.0
#: Run as root inside a new container, once: passwd and group entries, so that the name resolves.
ACCOUNT_SCRIPT = (
    'grep -q "^$1:" /etc/passwd || echo "$1:x:$2:$3::$4:/bin/bash" >> /etc/passwd; '
    'cut -d: -f3 /etc/group | grep -qx "$3" || echo "$5:x:$3:" >> /etc/group'
)


@dataclass(frozen=True)
class BrokerConfig:
    """Where the broker finds its image, its records and its engine: set by the root-owned script running it."""

    image_file: str = IMAGE_FILE
    #: The admin's allow-list: more images a user may ask for with --image, one per line, each pinned by digest.
    allowed_file: str = ALLOWED_FILE
    state_dir: str = STATE_DIR
    docker_config: str = DOCKER_CONFIG
    docker: str = DOCKER
    #: Another engine (tests, the box bench); None: the default socket.
    docker_host: str | None = None
    group: str = GROUP
    default_image: str = DEFAULT_IMAGE
    #: The admin's limits of each tank (memory, swap, processes, CPU share) and of tanks per user.
    limits_file: str = LIMITS_FILE


@dataclass(frozen=True)
class Caller:
    """The user sudo says called, as the passwd database has them."""

    uid: int
    gid: int
    user: str
    group: str
    home: str


@dataclass(frozen=True)
class Request:
    """One checked request: what to do, to which of the caller's containers, with what."""

    verb: str
    container: str = DEFAULT
    fresh: bool = False
    tty: bool = False
    cwd: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    image: str | None = None
    command: tuple[str, ...] | None = None
    json: bool = False


# -- who calls -----------------------------------------------------------------------------------


def caller_of(environ: Mapping[str, str], config: BrokerConfig) -> Caller:
    """The calling user, from ``SUDO_UID``; refused unless run as root for a member of the group."""
    import grp

    if os.geteuid() != 0:
        raise BrokerError(f"the broker runs as root through sudo: sudo {BROKER_PATH} ...")
    text = environ.get("SUDO_UID", "")
    if not text.isdigit():
        raise BrokerError("no SUDO_UID: the broker runs through sudo, for the user who called it")
    try:
        entry = pwd.getpwuid(int(text))
    except KeyError:
        raise BrokerError(f"uid {text} has no account on this box") from None
    if entry.pw_uid == 0:
        raise BrokerError("root runs docker itself; the broker serves the users of group " + config.group)
    try:
        member = grp.getgrnam(config.group).gr_gid in os.getgrouplist(entry.pw_name, entry.pw_gid)
    except KeyError:
        member = False
    if not member:
        raise BrokerError(f"{entry.pw_name} is not enrolled here (group {config.group}): the admin runs "
                          f"tank/setup-host.sh --user {entry.pw_name}")  # fmt: skip
    try:
        group = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        group = entry.pw_name
    return Caller(entry.pw_uid, entry.pw_gid, entry.pw_name, group, entry.pw_dir.rstrip("/") or "/")


def home_problem(caller: Caller) -> str | None:
    """Why the caller's home may not be mounted, or None: a real directory of theirs, below folders only root writes."""
    try:
        info = os.lstat(caller.home)
    except OSError as exc:
        return f"{caller.home} cannot be read ({exc.strerror}): the admin makes it (mkhomedir)"
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != caller.uid:
        return f"{caller.home} is not a directory owned by {caller.user}: the admin fixes it"
    parent = os.path.dirname(caller.home)
    while True:
        info = os.lstat(parent)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
            return f"{parent}, above {caller.home}, is not a root-owned folder only root writes: the admin fixes it"
        if parent == "/":
            return None
        parent = os.path.dirname(parent)


# -- what is asked --------------------------------------------------------------------------------


def _refuse(why: str) -> BrokerError:
    return BrokerError(f"refused: {why} (puffertank-login --help says what a login can do)")


def _container(name: str) -> str:
    if name != DEFAULT and not NAME_RE.match(name):
        raise _refuse(f"container name {name[:40]!r} is not [a-z0-9][a-z0-9_-], at most 31 characters")
    return name


def _env(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    if not sep or not ENV_KEY_RE.match(key) or not ENV_VALUE_RE.match(value):
        raise _refuse(f"--env {pair[:60]!r}: only the terminal's, the locale's and ssh's variables pass")
    return key, value


def _session(words: list[str]) -> Request:
    """``session``'s options, each checked; ``-c`` takes the rest."""
    options: dict = {}
    env: list[tuple[str, str]] = []
    while words:
        word = words.pop(0)
        if word == "-c":
            if not words or not words[0]:
                raise _refuse("-c needs a command")
            options["command"] = tuple(words)
            break
        if word in ("--fresh", "--tty"):
            options[word[2:]] = True
            continue
        if word not in ("--container", "--cwd", "--env", "--image") or not words:
            raise _refuse(f"{word[:40]!r} is not an option of session")
        value = words.pop(0)
        if word == "--container":
            options["container"] = _container(value)
        elif word == "--cwd":
            if not value.startswith("/") or "\x00" in value or len(value) > 4096:
                raise _refuse("--cwd takes an absolute path")
            options["cwd"] = os.path.normpath(value)
        elif word == "--env":
            env.append(_env(value))
        else:
            problem = image_reference_problem(value)
            if problem is not None:
                raise _refuse(f"--image {value[:80]!r} {problem}")
            options["image"] = value
    return Request("session", env=tuple(env), **options)


def parse_request(argv: Sequence[str]) -> Request:
    """``argv`` as a :class:`Request`; :class:`BrokerError` (one line) for anything outside the grammar."""
    words = list(argv)
    if not words:
        raise _refuse("no request: session, list, stop NAME or rm NAME")
    if len(words) > MAX_ARGS or sum(len(word.encode("utf-8", "replace")) for word in words) > MAX_ARG_BYTES:
        raise _refuse("too many arguments")
    if any(not isinstance(word, str) or "\x00" in word for word in words):
        raise _refuse("an argument holds a NUL byte")
    verb, rest = words[0], words[1:]
    if verb == "session":
        return _session(rest)
    if verb == "list" and rest in ([], ["--json"]):
        return Request("list", json=bool(rest))
    if verb in ("stop", "rm") and len(rest) == 1:
        return Request(verb, container=_container(rest[0]))
    raise _refuse(f"{' '.join(words)[:80]!r} is not session, list, stop NAME or rm NAME")


def container_name(caller: Caller, name: str) -> str:
    """``puffertank-USER`` for the default container, ``puffertank-USER.NAME`` for another."""
    return f"puffertank-{caller.user}" if name == DEFAULT else f"puffertank-{caller.user}.{name}"


# -- the box's images -----------------------------------------------------------------------------


def _image_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as file:
            lines = [line.split("#", 1)[0].strip() for line in file.read(65536).splitlines()]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise BrokerError(f"cannot read {path}: {exc.strerror}") from None
    for line in lines:
        if line and image_reference_problem(line) is not None:
            raise BrokerError(f"{path} holds {line[:80]!r}, {image_reference_problem(line)}: the admin fixes it")
    return [line for line in lines if line]


def choose_image(request: Request, config: BrokerConfig) -> str:
    """The box's image, or ``--image`` when the admin's allow-list pins it by digest.

    A line of the allow-list is ``NAME[:TAG]@sha256:DIGEST``; a user asks for it by the whole
    line or by ``NAME:TAG``, and the container is made from ``NAME@sha256:DIGEST``: a tag alone
    names whatever was pulled or built under it last, so it never chooses what a tank runs."""
    box = (_image_lines(config.image_file) or [config.default_image])[0]
    if request.image is None or request.image == box:
        return box
    for line in _image_lines(config.allowed_file):
        ref = parse_image_reference(line)
        named = f"{ref.name}:{ref.tag}" if ref.tag else ref.name
        if request.image not in (line, named, f"{ref.name}@{ref.digest}"):
            continue
        if ref.digest is None:
            raise _refuse(f"{config.allowed_file} lists {line} by tag alone, which names whatever was pulled or built "
                          f"under it last; the admin pins it by digest ({line}@sha256:…, as puffer tank pull prints "
                          "it)")  # fmt: skip
        return f"{ref.name}@{ref.digest}"
    raise _refuse(f"--image {request.image} is not one of this box's images ({box}; the admin lists others, "
                  f"pinned by digest, in {config.allowed_file})")  # fmt: skip


# -- the engine -----------------------------------------------------------------------------------


class Engine:
    """``/usr/bin/docker`` with the broker's own environment; each failure one line."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.path = config.docker
        self.env = {"PATH": SAFE_PATH, "HOME": "/root", "LANG": "C.UTF-8", "DOCKER_CONFIG": config.docker_config}
        if config.docker_host:
            self.env["DOCKER_HOST"] = config.docker_host
        if not os.access(self.path, os.X_OK):
            raise BrokerError(f"{self.path} is missing: the admin runs tank/setup-host.sh (it installs the engine)")

    def run(self, args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run([self.path, *args], capture_output=True, text=True, env=self.env,
                                  timeout=DOCKER_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise BrokerError(
                f"docker {args[0]} did not answer within {DOCKER_TIMEOUT:.0f} s: is the engine stuck?"
            ) from None
        if check and proc.returncode != 0:
            raise self.error(proc.stderr, args[0])
        return proc

    def error(self, stderr: str, verb: str) -> BrokerError:
        text = " ".join(stderr.split())
        if "Cannot connect to the Docker daemon" in text or "Is the docker daemon running" in text:
            return BrokerError("no Docker engine answers on this box: the admin starts it (systemctl start docker)")
        return BrokerError(f"docker {verb} failed: {text[:300] or 'no message'}")

    def inspect(self, kind: str, name: str) -> dict | None:
        proc = self.run([kind, "inspect", "--", name], check=False)
        if proc.returncode != 0:
            if "no such" in proc.stderr.lower():
                return None
            raise self.error(proc.stderr, f"{kind} inspect")
        found = json.loads(proc.stdout or "[]")
        return found[0] if found else None

    def become(self, args: Sequence[str]) -> NoReturn:
        """Become ``docker ARGS``: the terminal, signals and exit code are then Docker's."""
        try:
            become(self.path, [self.path, *args], self.env)
        except TankError as exc:
            raise BrokerError(str(exc)) from None


# -- root's record of who owns what: puffer_core.tank.box.ownership ----------------------------------


def owned(engine: Engine, ownership: Ownership, caller: Caller, name: str) -> dict | None:
    """The caller's container ``name`` as the engine has it, None when there is none; refused when not theirs."""
    full = container_name(caller, name)
    found = engine.inspect("container", full)
    if found is None:
        return None
    record = ownership.owner(found.get("Id", ""))
    if record is None or record.get("uid") != caller.uid or record.get("name") != name:
        raise BrokerError(
            f"a container named {full} is on this box but the broker did not make it for {caller.user}: it is never "
            f"joined, started or removed for you; an admin removes it (docker rm -f {full}; your home is kept)"
        )
    return found


# -- what the broker does ---------------------------------------------------------------------------


def create_argv(caller: Caller, name: str, image: str, gpus: bool, limits: TankLimits) -> list[str]:
    """``docker run --detach ...``: one of the caller's long-lived containers, idle until a session joins."""
    full = container_name(caller, name)
    home = caller.home
    argv = ["run", "--detach", "--init", "--name", full, *limits.docker_args()]
    argv += [
        "--label",
        f"{KIND_LABEL}=login",
        "--label",
        f"{LOGIN_LABEL}={caller.uid}",
        "--label",
        f"{NAME_LABEL}={name}",
    ]
    argv += ["--security-opt", "no-new-privileges", "--cap-drop", "ALL", "--user", f"{caller.uid}:{caller.gid}"]
    argv += ["--mount", bind_mount(home, home), "--workdir", home]
    argv += ["--env", f"HOME={home}", "--env", f"USER={caller.user}", "--env", f"LOGNAME={caller.user}"]
    # Where `puffer runs` says a run runs, and the entrypoint's cue to resume the interrupted ones.
    argv += ["--env", f"PUFFERTANK_BOX={socket.gethostname()}", "--env", f"PUFFERTANK_CONTAINER={full}"]
    argv += ["--env", "PUFFERTANK_RESUME_RUNS=1"]
    # The image's entrypoint prints its banner only into the container's log; keep that quiet.
    argv += ["--env", "PUFFERTANK_QUIET=1", "--hostname", "puffertank", "--shm-size", "1g"]
    # Host networking: Ray's ports, TensorBoard and a notebook answer on the box's own address.
    argv += ["--network", "host", "--restart", "unless-stopped"]
    if gpus:
        argv += ["--gpus", "all"]
    return [*argv, "--", image, "sleep", "infinity"]


def session_argv(caller: Caller, request: Request, container_id: str | None = None) -> list[str]:
    """``docker exec ...``: a login shell, or the command, inside the caller's container.

    ``container_id``: the container checked as the caller's, named by its id (not its name,
    which could name another by the time docker reads it)."""
    argv = ["exec", "--interactive"]
    if request.tty:  # only with a terminal at both ends: scp's and rsync's byte streams stay untouched
        argv.append("--tty")
    cwd = request.cwd or caller.home
    inside = cwd == caller.home or cwd.startswith(caller.home.rstrip("/") + "/")
    argv += ["--workdir", cwd if inside else caller.home]
    for key, value in request.env:
        argv += ["--env", f"{key}={value}"]
    argv += ["--", container_id or container_name(caller, request.container)]
    if request.command is None:
        return [*argv, "bash", "-l"]
    return [*argv, "bash", "-c", *request.command]


def _make(engine: Engine, ownership: Ownership, caller: Caller, request: Request, say) -> str:
    """A new container for ``request``, recorded as the caller's before anything else can happen; its id."""
    problem = home_problem(caller)
    if problem is not None:
        raise BrokerError(f"{caller.user}'s home cannot be mounted: {problem}")
    image = present_image(engine, request)
    limits = tank_limits(engine.config)
    runtimes = engine.run(["info", "--format", "{{json .Runtimes}}"], check=False).stdout
    with ownership.locked():
        held = tanks_of(engine, ownership, caller)
        if len(held) >= limits.tanks and request.container not in held:
            raise _too_many(held, limits, engine.config)
        argv = create_argv(caller, request.container, image, gpus='"nvidia"' in runtimes, limits=limits)
        proc = engine.run(argv, check=False)
        if proc.returncode != 0:
            if "is already in use" in proc.stderr:  # another session made it first: join that one
                return (owned(engine, ownership, caller, request.container) or {}).get("Id", "")
            raise engine.error(proc.stderr, "run")
        container_id = proc.stdout.strip()
        ownership.record(container_id, caller, request.container)
    account = [caller.user, str(caller.uid), str(caller.gid), caller.home, caller.group]
    engine.run(["exec", "--user", "0", "--", container_id, "sh", "-c", ACCOUNT_SCRIPT, "sh", *account])
    if request.fresh:
        say(f"replaced {container_name(caller, request.container)}: a new container from {image} (your home is kept)")
    return container_id


def tank_limits(config: BrokerConfig) -> TankLimits:
    """The box's limits of each tank; one line for the admin when their file is not one."""
    try:
        return box_limits(config.limits_file)
    except LimitsError as exc:
        raise BrokerError(f"{exc}: the admin fixes it (tank/setup-host.sh --help lists the limits)") from None


def tanks_of(engine: Engine, ownership: Ownership, caller: Caller) -> list[str]:
    """The names of the caller's tanks that exist (records of containers gone are dropped)."""
    names = []
    for container_id, record in ownership.of(caller.uid).items():
        if engine.inspect("container", container_id) is None:
            ownership.forget(container_id)
        else:
            names.append(str(record.get("name", "?")))
    return sorted(names)


def _too_many(held: list[str], limits: TankLimits, config: BrokerConfig) -> BrokerError:
    return BrokerError(
        f"refused: you have {len(held)} tank{'s' * (len(held) != 1)} ({', '.join(held)}), the most this box gives "
        f"one user (tanks = {limits.tanks} in {config.limits_file}): remove one first (puffer tank login --rm NAME)"
    )


def apply_limits(engine: Engine, found: dict, say) -> None:
    """Bring a tank made under other limits (or none) to the box's: ``docker update``; a refusal is one line."""
    limits = tank_limits(engine.config)
    host = found.get("HostConfig") or {}
    if all(host.get(key) == value for key, value in limits.of_container().items()):
        return
    proc = engine.run(["update", *limits.docker_args(), "--", found["Id"]], check=False)
    if proc.returncode != 0:
        say(f"this tank keeps its earlier limits ({' '.join(proc.stderr.split())[:200]}); "
            "puffer tank login --fresh makes it anew under the box's")  # fmt: skip


def present_image(engine: Engine, request: Request) -> str:
    """The image a new container is made from, when it is on this box; else one line saying how to get it."""
    image = choose_image(request, engine.config)
    if engine.inspect("image", image) is None:
        raise BrokerError(f"no image {image} on this box: the admin gets one (puffer tank pull REPO@sha256:…) "
                          "or builds it (puffer tank build)")  # fmt: skip
    return image


def session(engine: Engine, ownership: Ownership, caller: Caller, request: Request, say) -> NoReturn:
    """Start or join the caller's container (made if missing, replaced with ``--fresh``), then become the session."""
    found = owned(engine, ownership, caller, request.container)
    if found is not None and request.fresh:
        present_image(engine, request)  # before the old one goes: a refused --fresh leaves it as it was
        _remove(engine, ownership, found)
        found = None
    if found is None:
        container_id = _make(engine, ownership, caller, request, say)
    else:
        container_id = found["Id"]
        apply_limits(engine, found, say)
        if not (found.get("State") or {}).get("Running"):
            engine.run(["start", "--", container_id])
    engine.become(session_argv(caller, request, container_id or None))


def _remove(engine: Engine, ownership: Ownership, found: dict) -> None:
    with ownership.locked():
        engine.run(["rm", "--force", "--", found["Id"]])
        ownership.forget(found["Id"])


def listing(engine: Engine, ownership: Ownership, caller: Caller) -> list[dict]:
    """The caller's containers: name, state, since, image, limits; records of containers gone are dropped."""
    rows = []
    for container_id, record in ownership.of(caller.uid).items():
        found = engine.inspect("container", container_id)
        if found is None:
            with ownership.locked():
                ownership.forget(container_id)
            continue
        state = found.get("State") or {}
        rows.append({
            "name": record.get("name", "?"),
            "container": found.get("Name", "").lstrip("/"),
            "state": "running" if state.get("Running") else (state.get("Status") or "stopped"),
            "since": state.get("StartedAt") if state.get("Running") else state.get("FinishedAt"),
            "image": (found.get("Config") or {}).get("Image"),
            "limits": _limits_of(found),
        })  # fmt: skip
    return sorted(rows, key=lambda row: (row["name"] != DEFAULT, row["name"]))


def _limits_of(found: dict) -> dict:
    """A tank's limits as the engine applies them: memory and swap in bytes (None: unlimited), processes, CPU share."""
    host = found.get("HostConfig") or {}
    memory, total = host.get("Memory") or 0, host.get("MemorySwap") or 0
    return {
        "memory": memory or None,
        "swap": None if not memory or total < 0 else max(0, total - memory),
        "pids": host.get("PidsLimit") or None,
        "cpu_shares": host.get("CpuShares") or None,
    }


def _print_listing(rows: list[dict], as_json: bool, limits: TankLimits) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(f"each tank here: {limits.describe()} (you have {len(rows)}); the GPU is shared")
    if not rows:
        print("no containers yet: your next login makes one")
        return
    for row in rows:
        memory = row["limits"]["memory"]
        shown = "no memory limit" if memory is None else f"memory {format_size(memory)}"
        print(f"{row['name']:<16} {row['state']:<10} {str(row['since'])[:19]:<20} {row['image']}  ({shown})")


def main(argv: Sequence[str] | None = None, config: BrokerConfig | None = None) -> int:
    """``puffertank-broker REQUEST...`` as root through sudo; 1 and one line when refused."""
    config = config or BrokerConfig()

    def say(line: str) -> None:
        print(f"puffertank: {line}", file=sys.stderr)

    try:
        caller = caller_of(os.environ, config)
        request = parse_request(sys.argv[1:] if argv is None else argv)
        engine = Engine(config)
        ownership = Ownership(config)
        if request.verb == "session":
            session(engine, ownership, caller, request, say)
        if request.verb == "list":
            _print_listing(listing(engine, ownership, caller), request.json, tank_limits(config))
            return 0
        found = owned(engine, ownership, caller, request.container)
        if found is None:
            raise BrokerError(f"you have no container {request.container} (puffertank-login --list shows yours)")
        if request.verb == "stop":
            engine.run(["stop", "--time", "10", "--", found["Id"]])
        else:
            _remove(engine, ownership, found)
        say(f"{'stopped' if request.verb == 'stop' else 'removed'} {container_name(caller, request.container)}")
        return 0
    except BrokerError as exc:
        say(str(exc))
        return 1
    except KeyboardInterrupt:
        return 130
