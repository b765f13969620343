"""Files written whole or not at all.

A file someone relies on (a checkpoint, a curve, a recording, a results file) is written
to a temporary file with a unique name in the target's own directory (so the final
``os.replace`` is a rename within one file system), flushed and fsynced, then renamed over
the target; the directory is fsynced so the rename survives a power cut. A crash at any
point leaves either the old file or the new one, never half of one, and two processes
writing the same target never share a temporary file. ``publish_new`` names a finished file
without replacing one that took the name meanwhile.

Every directory Puffer Core writes into is private (``private_directory``): made 0700 when
new, refused when another user owns it or others can write it (they could plant a symlink
or a file of their own where ours is written). Imports only the contract's errors.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import re
import shlex
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from puffer_core.errors import APIUsageError

__all__ = [
    "is_temporary_of",
    "make_temporary",
    "private_directory",
    "publish_new",
    "remove_stale_temporaries",
    "replace_durably",
    "temporary_beside",
    "write_atomically",
]

#: what ``tempfile`` puts in a name: 8 characters of ``[a-z0-9_]``
_RANDOM = re.compile(r"[a-z0-9_]{8}")


def _prefix(target: Path) -> str:
    return f".{target.name}."


def _suffix(target: Path, tag: str) -> str:
    # The target's own suffix last: writers such as imageio pick the format by it.
    return f".{tag}{target.suffix}"


def make_temporary(target: str | os.PathLike, tag: str = "tmp", mode: int = 0o644) -> Path:
    """A new, empty, uniquely named file next to ``target``: ``.NAME.<pid>-<random>.TAG.SUFFIX``.
    ``mode``: its permissions, less the umask (tempfile makes files 0600; a recording or a
    checkpoint should read like any other file)."""
    target = Path(target)
    directory = target.parent if str(target.parent) else Path(".")
    fd, name = tempfile.mkstemp(prefix=f"{_prefix(target)}{os.getpid()}-", suffix=_suffix(target, tag), dir=directory)
    try:
        os.fchmod(fd, mode & ~_umask())
    finally:
        os.close(fd)
    return Path(name)


@contextlib.contextmanager
def temporary_beside(target: str | os.PathLike, tag: str = "tmp", mode: int = 0o644) -> Iterator[Path]:
    """``make_temporary``'s file, removed on the way out unless something renamed it away."""
    path = make_temporary(target, tag, mode)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def is_temporary_of(candidate: str | os.PathLike, target: str | os.PathLike, tag: str = "tmp") -> int | None:
    """The pid of the process that made ``candidate`` with ``temporary_beside(target, tag)``, or
    None when ``candidate`` is any other file (an exact match of the name's parts, no globbing,
    so ``run[1].mp4`` never matches another file's temporaries)."""
    candidate, target = Path(candidate), Path(target)
    prefix, suffix = _prefix(target), _suffix(target, tag)
    name = candidate.name
    if not (name.startswith(prefix) and name.endswith(suffix)) or len(name) <= len(prefix) + len(suffix):
        return None
    pid, dash, random = name[len(prefix) : -len(suffix)].partition("-")
    if not (dash and pid.isdigit() and _RANDOM.fullmatch(random)):
        return None
    return int(pid)


def remove_stale_temporaries(target: str | os.PathLike, tag: str = "tmp") -> None:
    """Remove the temporary files of ``target`` left by processes that died mid-write."""
    target = Path(target)
    directory = target.parent if str(target.parent) else Path(".")
    with os.scandir(directory) as entries:
        for entry in entries:
            pid = is_temporary_of(entry.name, target, tag)
            if pid is not None and not _alive(pid):
                Path(entry.path).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def replace_durably(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Rename ``source`` over ``target`` and fsync their directory (the rename itself is atomic)."""
    os.replace(source, target)
    _sync_directory(_parent(Path(target)))


def publish_new(source: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Give the finished file ``source`` the name ``target`` without replacing a file that took
    that name since it was checked; returns the name it got: ``target``, or, when that exists
    now (left as it is), the first free ``STEM-2.SUFFIX``, ``STEM-3.SUFFIX``, … beside it."""
    source, target = Path(source), Path(target)
    for n in range(1, 1000):
        name = target if n == 1 else target.with_name(f"{target.stem}-{n}{target.suffix}")
        if _link_new(source, name):
            _sync_directory(_parent(name))
            return name
    raise FileExistsError(errno.EEXIST, "it and 998 numbered names beside it exist", str(target))


def _link_new(source: Path, target: Path) -> bool:
    """Move ``source`` to the new name ``target``; False (``source`` untouched) when ``target`` exists."""
    try:
        os.link(source, target)  # fails if target exists, even as a dangling symlink
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            raise
        # No hard links here (vfat, some FUSE and network file systems): claim the name with an
        # exclusive create, then rename over our own empty file.
        try:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            return False
        os.replace(source, target)
        return True
    os.unlink(source)
    return True


def _parent(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _sync_directory(directory: Path) -> None:
    """fsync ``directory`` so a rename or link in it survives a power cut."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a directory that cannot be opened (some network file systems): the rename stands
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def private_directory(path: str | os.PathLike, create: bool = True) -> Path:
    """``path``, a directory only this user can write into: made 0700 (missing parents as ``mkdir -p``
    makes them) when ``create`` and it is missing; refused with one line when another user owns it
    or its group (unless the user's own private group) or others can write it: they could replace
    what is written there, or plant a symlink where a file is about to be written."""
    directory = Path(path) if str(path) else Path(".")
    if create:
        try:
            directory.mkdir(mode=0o700, parents=True)
            return directory
        except FileExistsError:
            pass  # an existing one is checked: a race with another mkdir is as if it existed before
    info = os.stat(directory)
    name = os.path.abspath(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise APIUsageError(f"{name} is not a directory; give a directory for the files")
    if info.st_uid != os.geteuid():
        raise APIUsageError(
            f"{name} belongs to {_user_name(info.st_uid)}, not to you: its owner could replace the files written "
            "there; give a directory of your own"
        )
    writable = info.st_mode & (0o002 if _own_private_group(info.st_gid) else 0o022)
    if writable:
        who = "others" if writable & 0o002 else f"group {_group_name(info.st_gid)}"
        raise APIUsageError(
            f"{name} is writable by {who} (mode {stat.S_IMODE(info.st_mode):04o}): they could plant a symlink where "
            f"a file is written; run `chmod go-w {shlex.quote(name)}` or give a directory of your own"
        )
    return directory


def _own_private_group(gid: int) -> bool:
    """Whether ``gid`` is this user's private group (named after the user, no other member):
    a group-writable directory is then writable by no one else (Debian's and Ubuntu's umask 002)."""
    try:
        user, group = pwd.getpwuid(os.geteuid()), grp.getgrgid(gid)
    except KeyError:
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (see the module docstring)."""
    path = Path(path)
    remove_stale_temporaries(path)
    with temporary_beside(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        replace_durably(tmp, path)


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it, which races threads)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
