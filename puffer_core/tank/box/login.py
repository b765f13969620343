"""``puffertank-login`` / ``puffer tank login``: a box's login shell, landing each user in their own PufferTank.

A user enrolled on a shared box (``tank/setup-host.sh --user NAME``) has this as their
login shell, and gets, on every ssh or ``su -`` session, a shell in one long-lived
container of their own, ``puffertank-<user>``: made on the first login from the box's
image, their home mounted at the same path, as their uid:gid, every capability dropped,
restarted with the engine. A command (``ssh box CMD``, ``su - user -c CMD``, scp's, sftp's
and rsync's servers, editors' remote servers) runs inside, stdin and stdout passed through
untouched. ``--fresh`` replaces the container (the home is kept), ``--new NAME`` lands in a
second container of theirs, ``--list``, ``--stop NAME`` and ``--rm NAME`` manage them; the
same options work as ``ssh box puffer tank login …``.

The user never holds the engine (it is root-equivalent): this runs as the user, checks its
arguments, and calls the root-owned broker (:mod:`puffer_core.tank.box.broker`) through its one
sudo rule, which checks them again and does the rest. It imports the standard library and
:mod:`puffer_core.tank.box` alone, because it runs on every ssh command of every user.
"""

from __future__ import annotations

import dataclasses
import grp
import os
import pwd
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from puffer_core.specs.images import image_reference_problem
from puffer_core.tank.box.protocol import (
    BROKER_PATH,
    DEFAULT,
    DEFAULT_IMAGE,
    ENV_KEY_RE,
    ENV_VALUE_RE,
    GROUP,
    IMAGE_FILE,
    LOGIN_PATH,
    NAME_RE,
    SUDO,
    become,
    image_reference,
)
from puffer_core.tank.errors import TankError

__all__ = ["IMAGE_FILE", "LoginArgs", "box_image", "broker_argv", "login", "main", "parse_args", "self_command"]

#: What `ssh box puffer tank login --fresh` sends: handled on the host, not inside.
SELF_COMMAND = ("puffer", "tank", "login")
#: sshd's in-process sftp server (``Subsystem sftp internal-sftp``) is served in the tank by OpenSSH's own.
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
USAGE = """usage: puffertank-login [--fresh] [--new NAME] [--image REF] [-c COMMAND [ARG...]]
       puffertank-login --list [--json] | --stop NAME | --rm NAME
       ssh BOX puffer tank login [the same options]

A box's login shell: lands you in your own long-lived PufferTank container
(puffertank-USER, your home mounted, your uid), made from the box's image on first use.
  -c COMMAND    run COMMAND inside (what ssh, su -c, scp and rsync send), then leave
  --fresh       replace the container with a new one from the box's current image
                (everything outside your home is reset)
  --new NAME    a second container of yours, puffertank-USER.NAME: made if missing, then joined
  --image REF   the image of a new container: the box's (/etc/puffertank/image) or one the
                admin allows (/etc/puffertank/images)
  --list        your containers (--json for scripts); default is puffertank-USER
  --stop NAME   stop one (its files stay; the next login into it starts it again)
  --rm NAME     remove one (your home is kept)
  -l, --login   accepted and ignored (a login shell is always a login)
"""


@dataclass(frozen=True)
class LoginArgs:
    """The login's own arguments, shell-style (what sshd, su and usermod -s give a shell)."""

    fresh: bool = False
    image: str | None = None
    command: str | None = None
    command_args: tuple[str, ...] = ()
    help: bool = False
    container: str = DEFAULT
    #: ``list``, ``stop`` or ``rm`` instead of a session.
    action: str | None = None
    json: bool = False


def box_image(path: str = IMAGE_FILE) -> str:
    """The box's current image: the first word of ``path``, else ``puffertank:latest``."""
    try:
        with open(path, encoding="utf-8") as file:
            words = file.read(65536).split()
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


def _name(option: str, value: str) -> str:
    if value != DEFAULT and not NAME_RE.match(value):
        raise TankError(f"{option} {value[:40]!r} is not a container name: a-z, 0-9, '_' and '-', at most 31")
    return value


def _value(word: str, rest: list[str], option: str, example: str) -> str:
    value = word.partition("=")[2] if "=" in word else (rest.pop(0) if rest else "")
    if not value.strip():
        raise TankError(f"{option} needs a value, e.g. {option} {example}")
    return value.strip()


def parse_args(argv: Sequence[str]) -> LoginArgs:
    """``[-l] [--fresh] [--new NAME] [--image REF] [--list [--json]|--stop NAME|--rm NAME] [-c COMMAND [ARG...]]``."""
    args = LoginArgs()
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        option = word.partition("=")[0]
        if word in ("-l", "--login"):
            continue
        if word in ("-h", "--help"):
            return dataclasses.replace(args, help=True)
        if word in ("--fresh", "--json"):
            args = dataclasses.replace(args, **{word[2:]: True})
        elif word == "--list":
            args = dataclasses.replace(args, action="list")
        elif option == "--image":
            image = image_reference(_value(word, rest, option, "puffertank:latest"), "--image")
            args = dataclasses.replace(args, image=str(image))
        elif option in ("--new", "--stop", "--rm"):
            name = _name(option, _value(word, rest, option, "exp1"))
            action = None if option == "--new" else option[2:]
            args = dataclasses.replace(args, container=name, action=action or args.action)
        elif word == "-c":
            if not rest:
                raise TankError("-c needs a command, e.g. -c 'nvidia-smi'")
            return dataclasses.replace(args, command=rest[0], command_args=tuple(rest[1:]))
        else:
            raise TankError(f"{word!r} is not an option of puffertank-login (see --help)")
    if args.json and args.action != "list":
        raise TankError("--json goes with --list")
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


def broker_argv(args: LoginArgs, environ: Mapping[str, str], tty: bool, cwd: str | None) -> list[str]:
    """The broker's request for ``args``; ``SSH_ORIGINAL_COMMAND`` stands for ``-c`` under sshd's ForceCommand."""
    if args.action == "list":
        return ["list", *(["--json"] if args.json else [])]
    if args.action in ("stop", "rm"):
        return [args.action, args.container]
    argv = ["session"]
    if args.container != DEFAULT:
        argv += ["--container", args.container]
    if args.fresh:
        argv.append("--fresh")
    if tty:
        argv.append("--tty")
    if cwd is not None:
        argv += ["--cwd", cwd]
    for key in sorted(environ):
        if ENV_KEY_RE.match(key) and ENV_VALUE_RE.match(environ[key]):
            argv += ["--env", f"{key}={environ[key]}"]
    if args.image is not None:
        argv += ["--image", args.image]
    command = args.command if args.command is not None else original_command(environ)
    if command is not None:
        argv += ["-c", command, *(args.command_args if args.command is not None else ())]
    return argv


def original_command(environ: Mapping[str, str]) -> str | None:
    """The client's command under sshd's ForceCommand; an ``internal-sftp`` subsystem becomes the tank's sftp server."""
    command = environ.get("SSH_ORIGINAL_COMMAND") or None
    if command is not None and command.split(maxsplit=1)[0] == "internal-sftp":
        return SFTP_SERVER + command[len("internal-sftp") :]
    return command


def forced(args: LoginArgs, path: str) -> LoginArgs:
    """``args`` as sshd's ForceCommand gives them: it runs ``LOGIN -c LOGIN``, which is no command of the user's
    (theirs, if any, is ``SSH_ORIGINAL_COMMAND``)."""
    if args.command == path and not args.command_args:
        return dataclasses.replace(args, command=None)
    return args


def _enrolled(group: str) -> bool:
    try:
        return grp.getgrnam(group).gr_gid in os.getgroups()
    except KeyError:
        return False


def login(
    args: LoginArgs, environ: Mapping[str, str] | None = None, broker: str = BROKER_PATH, group: str = GROUP
) -> NoReturn:
    """Become ``sudo BROKER REQUEST``: the broker makes or joins the container and becomes the session."""
    environ = os.environ if environ is None else environ
    if os.path.exists("/.dockerenv") and environ.get("PUFFERTANK"):
        raise TankError(
            "you are inside your PufferTank already: to replace it, leave and run ssh BOX puffer tank login --fresh"
        )
    command = args.command if args.command is not None else original_command(environ)
    again = self_command(command)
    if again is not None:  # `ssh box puffer tank login --fresh [-c CMD]`: this login's own options
        args = dataclasses.replace(again, image=again.image or args.image)
        environ = {key: value for key, value in environ.items() if key != "SSH_ORIGINAL_COMMAND"}
    if not _enrolled(group):
        user = pwd.getpwuid(os.getuid()).pw_name
        raise TankError(f"{user} is not enrolled on this box (group {group}): the admin runs "
                        f"tank/setup-host.sh --user {user}")  # fmt: skip
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    argv = [SUDO, "--non-interactive", "--", broker, *broker_argv(args, environ, tty, cwd)]
    try:
        become(SUDO, argv)
    except TankError as exc:
        raise TankError(f"{exc}; the admin installs sudo (tank/setup-host.sh)") from None


def main(
    argv: Sequence[str] | None = None, broker: str = BROKER_PATH, group: str = GROUP, path: str = LOGIN_PATH
) -> int:
    """``puffertank-login``: the login shell's entry point (argv[0] may be ``-puffertank-login``).

    ``broker``, ``group``, ``path`` (where this login is installed): set only by a root-owned
    script (a test's or the box bench's), never by the user.
    """
    try:
        args = forced(parse_args(sys.argv[1:] if argv is None else argv), path)
        if args.help:
            print(USAGE, end="")
            return 0
        login(args, broker=broker, group=group)
    except TankError as exc:
        print(f"puffertank-login: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
