"""What the Ray instance of our own keeps on disk, readable by this user only: its token and its
temporary directory.

- The token (Ray reads ``RAY_AUTH_TOKEN``, else the file ``RAY_AUTH_TOKEN_PATH`` names, else
  ``~/.ray/auth_token``) is written here before Ray starts, never by Ray: Ray writes it with the
  process umask (often world-readable) and only tightening it afterwards leaves it readable
  while Ray starts. ``~/.ray`` is made 0700 (created so, or tightened when it is ours; one
  of another user or a symlink is refused). A token file that is missing, readable by group or
  others, not ours, not a regular file or a symlink is replaced by a new one (``secrets``,
  created ``O_CREAT|O_EXCL|O_NOFOLLOW`` with mode 0600), never reused: whoever could read it
  may have kept it. A token you give is yours: ``RAY_AUTH_TOKEN`` is used as it is, and the
  file ``RAY_AUTH_TOKEN_PATH`` names must exist, be yours and be readable by you only (else
  one line says so; it is never changed).
- The temporary directory (Ray's sockets, session files, logs and spilled objects; Ray's
  default ``/tmp/ray`` is shared by every user, and Ray makes each directory it creates
  there 0777, its own ``_temp_dir`` included) is ``ray`` inside a new 0700 ``mkdtemp`` in the
  directory Ray would use (``RAY_TMPDIR``, else ``TMPDIR``, else ``/tmp``): no other user
  can enter it, whatever Ray does below. It is removed when the process exits, after Ray
  shut down.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import secrets
import shutil
import stat
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from puffer_core.errors import APIUsageError

__all__ = ["TOKEN_NAME", "private_temp_dir", "private_token", "remove_at_exit", "write_token"]

TOKEN_NAME = "auth_token"  # in ~/.ray, where Ray looks without RAY_AUTH_TOKEN(_PATH)
_TOKEN_ENV, _TOKEN_PATH_ENV = "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def private_token() -> None:
    """A token for the instance about to start, readable by this user only (see the module docstring)."""
    if os.environ.get(_TOKEN_ENV):
        return  # the caller's token, in the environment the Ray processes inherit
    named = os.environ.get(_TOKEN_PATH_ENV)
    if named:
        _check_named_token(Path(named).expanduser())
        return
    directory = Path.home() / ".ray"
    dir_fd = _private_directory(directory)
    try:
        _fresh_unless_private(dir_fd, directory / TOKEN_NAME)
    finally:
        os.close(dir_fd)
    with contextlib.suppress(ImportError):  # the driver reads the token once: not an older one it cached
        from ray._raylet import AuthenticationTokenLoader

        AuthenticationTokenLoader.instance().reset_cache()


def _private_directory(path: Path) -> int:
    """``path`` (``~/.ray``) as a directory of this user's, mode 0700 (created or tightened); its fd."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise APIUsageError(
            f"{path} is not a directory of yours ({exc.strerror or exc}): Ray's token would be kept where "
            f"another user may read or replace it; remove it, or set {_TOKEN_PATH_ENV} to a file only you can read"
        ) from None
    status = os.fstat(fd)
    if status.st_uid != os.getuid():
        os.close(fd)
        raise APIUsageError(
            f"{path} belongs to uid {status.st_uid}, not to you: Ray's token would be kept where that user can "
            f"read or replace it; remove it, or set {_TOKEN_PATH_ENV} to a file only you can read"
        )
    if status.st_mode & 0o077:
        os.fchmod(fd, 0o700)  # Ray creates it with the umask: ours, so made private
    return fd


def _fresh_unless_private(dir_fd: int, shown: Path) -> None:
    """The token file in ``dir_fd``: kept when it is a private regular file of ours holding a token,
    else replaced by a new one (a symlink is removed, never followed)."""
    for _ in range(3):  # another process of ours may create it between our look and our create
        why = _unfit_token(dir_fd)
        if why is None:
            return
        if why != "missing":
            os.unlink(TOKEN_NAME, dir_fd=dir_fd)
            warnings.warn(
                f"Ray's token {shown} was {why}: replaced by a new one (a Ray cluster started with the "
                "old token needs its processes restarted)",
                RuntimeWarning,
                stacklevel=2,
            )
        with contextlib.suppress(FileExistsError):
            write_token(TOKEN_NAME, dir_fd=dir_fd)
            return
    raise APIUsageError(f"could not write Ray's token {shown}: it keeps being replaced; is another program writing it?")


def _unfit_token(dir_fd: int) -> str | None:
    """Why the token file in ``dir_fd`` must not be used ("missing" when there is none), or None."""
    try:
        fd = os.open(TOKEN_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink"
        raise
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            return "not a regular file"
        if status.st_uid != os.getuid():
            return f"owned by uid {status.st_uid}"
        if status.st_mode & 0o077:
            return f"readable by others (mode {stat.S_IMODE(status.st_mode):04o})"
        if not file.read(4096).strip():
            return "empty"
    return None


def write_token(name: str | Path, dir_fd: int | None = None) -> None:
    """A new token (``secrets``, 256 bits as Ray makes them) in a new file ``name``, 0600 from its
    creation; FileExistsError if ``name`` exists (a symlink included: it is not followed)."""
    fd = os.open(name, _CREATE, 0o600, dir_fd=dir_fd)
    try:
        os.write(fd, secrets.token_hex(32).encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_named_token(path: Path) -> None:
    """The token file the caller named (``RAY_AUTH_TOKEN_PATH``): used only if it is theirs and private."""
    try:
        status = path.stat()
    except OSError as exc:
        why = f"cannot be read ({exc.strerror or exc})"
    else:
        why = None
        if not stat.S_ISREG(status.st_mode):
            why = "is not a regular file"
        elif status.st_uid != os.getuid():
            why = f"belongs to uid {status.st_uid}, not to you"
        elif status.st_mode & 0o077:
            why = f"is readable by others (mode {stat.S_IMODE(status.st_mode):04o})"
    if why is not None:
        raise APIUsageError(
            f"{_TOKEN_PATH_ENV}={str(path)!r} {why}: anyone who can read Ray's token can run code as you; give a "
            f"file of yours only you can read (a new token: chmod 600), or unset {_TOKEN_PATH_ENV}"
        )


def private_temp_dir() -> str:
    """A new directory (0700, this user's) to hold Ray's (pass ``<it>/ray`` as ``_temp_dir``), where Ray
    would put its own: ``RAY_TMPDIR``, else ``TMPDIR`` (Linux), else ``/tmp``; a short path, as
    Ray's socket paths below it must stay under 107 bytes."""
    parent = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform == "linux" else None)
    return tempfile.mkdtemp(prefix="ray-", dir=parent or "/tmp")


def remove_at_exit(ray: Any, temp_dir: str) -> None:
    """``temp_dir`` removed when the interpreter exits, after Ray shut down (Ray's own exit hook runs
    after ours, so ours shuts it down first, as that hook would)."""

    def remove() -> None:
        with contextlib.suppress(Exception):
            ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)

    atexit.register(remove)
