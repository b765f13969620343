"""What a puffer box is made of: its paths, its group, the labels and names of its tanks, declared once.

The broker (root), the login (each user), ``puffer fleet facts`` (root, for the fleet) and
``tank/setup-host.sh`` (which makes the box) all name these; ``tests/tank/test_box_protocol.py``
holds setup-host.sh's copies equal to them. Standard library only, and the contract's image
grammar (:mod:`puffer_core.specs.images`, itself standard library only).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

from puffer_core.specs.images import ImageRef, image_reference_problem, parse_image_reference
from puffer_core.tank.errors import TankError

__all__ = [
    "ALLOWED_FILE",
    "BROKER_PATH",
    "DEFAULT",
    "DEFAULT_IMAGE",
    "DOCKER",
    "DOCKER_CONFIG",
    "ENV_KEY_RE",
    "ENV_VALUE_RE",
    "GROUP",
    "IMAGE_FILE",
    "KIND_LABEL",
    "LIMITS_FILE",
    "LOGIN_LABEL",
    "LOGIN_PATH",
    "NAME_LABEL",
    "NAME_RE",
    "SSHD_DROPIN",
    "STATE_DIR",
    "SUDO",
    "SUDOERS",
    "become",
    "bind_mount",
    "image_reference",
]

#: The group whose members the broker serves (never ``docker``: that is root on the box).
GROUP = "puffertank"
#: The box's image (one reference, written by ``setup-host.sh --image``), and the admin's others, pinned by digest.
IMAGE_FILE = "/etc/puffertank/image"
ALLOWED_FILE = "/etc/puffertank/images"
#: Each tank's limits (:mod:`puffer_core.tank.box.limits`).
LIMITS_FILE = "/etc/puffertank/limits"
#: The broker's ``DOCKER_CONFIG``: root's, so no CLI plugin or credential helper of anyone's runs as root.
DOCKER_CONFIG = "/etc/puffertank/docker"
#: Root's record of who owns which tank (:mod:`puffer_core.tank.box.ownership`).
STATE_DIR = "/var/lib/puffertank/containers"
#: Where setup-host.sh installs the broker, the login, the one sudo rule and the group's sshd settings.
BROKER_PATH = "/usr/local/sbin/puffertank-broker"
LOGIN_PATH = "/usr/local/bin/puffertank-login"
SUDOERS = "/etc/sudoers.d/puffertank"
SSHD_DROPIN = "/etc/ssh/sshd_config.d/puffertank.conf"
SUDO = "/usr/bin/sudo"
DOCKER = "/usr/bin/docker"
#: The image a box without an image file runs.
DEFAULT_IMAGE = "puffertank:latest"

#: A user's first tank, ``puffertank-USER``; the others are ``puffertank-USER.NAME``.
DEFAULT = "default"
#: The labels of a tank (information for people and ``docker ps``; ownership is root's record, never a label).
LOGIN_LABEL = "org.puffer.tank.login"
KIND_LABEL = "org.puffer.tank.container"
NAME_LABEL = "org.puffer.tank.name"
#: A name of one of a user's tanks: short, lower case, no dot (the dot joins it to the user's).
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,30}\Z")
#: The terminal, locale and ssh facts a session keeps; nothing else of the caller's environment.
ENV_KEY_RE = re.compile(r"(TERM|COLORTERM|LANG|LANGUAGE|TZ|SSH_CONNECTION|SSH_CLIENT|SSH_TTY|LC_[A-Z_]{1,24})\Z")
ENV_VALUE_RE = re.compile(r"[^\x00-\x1f\x7f]{0,256}\Z")


def image_reference(given: str, option: str) -> ImageRef:
    """``given`` checked as an image reference (:mod:`puffer_core.specs.images`); TankError naming ``option``."""
    problem = image_reference_problem(given)
    if problem is not None:
        raise TankError(f"{option} {given!r} {problem}")
    return parse_image_reference(given)


def bind_mount(source: str | os.PathLike, target: str) -> str:
    """``--mount`` value of a bind mount; each path is a CSV field, quoted so commas and colons are plain."""
    fields = (f"{key}={path}".replace('"', '""') for key, path in (("source", source), ("target", target)))
    return "type=bind," + ",".join(f'"{field}"' for field in fields)


def become(path: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> NoReturn:
    """Become ``path`` (``argv``; ``env``, else this process's): the terminal, signals and exit code are then
    its. What this process printed is flushed first; a program that cannot start is a TankError naming it."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if env is None:
            os.execv(path, list(argv))
        os.execve(path, list(argv), dict(env))
    except OSError as exc:
        raise TankError(f"cannot start {path}: {exc.strerror}") from None
