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
or a file of their own where ours is written). A file someone else may have placed (a run's
record read by root, a log a copied run folder holds) is opened without following a link or
blocking on a FIFO, and used only when it is a regular file (``read_regular``,
``open_own_log``; ``open_directory_below`` walks folders the same way). Imports only the
contract's errors.
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
    "NotRegularFile",
    "is_temporary_of",
    "make_temporary",
    "open_directory_below",
    "open_own_log",
    "private_directory",
    "publish_new",
    "read_regular",
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
        except OSError as exc:  # /proc/x, a read-only mount, a file on the way: say where, not only why
            above = next((p for p in Path(os.path.abspath(directory)).parents if p.exists()), Path("/"))
            raise APIUsageError(
                f"cannot make the folder {os.path.abspath(directory)}: {above} takes no new folder there "
                f"({exc.strerror}); give a folder of your own, e.g. under your home"
            ) from None
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


# -- files someone else may have placed ----------------------------------------------------------


class NotRegularFile(OSError):
    """A file that is a link, a FIFO, a device or a folder, someone else's, or too large: not read."""


_NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def _opened(path: str | os.PathLike, flags: int, dir_fd: int | None, mode: int = 0o600) -> int:
    """``os.open`` without following a link at the last step; a link is refused as such."""
    try:
        return os.open(path, flags | _NO_FOLLOW, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, "a symbolic link, not followed", str(path)) from None
        if exc.errno == errno.ENXIO:  # O_WRONLY | O_NONBLOCK on a FIFO nobody reads, or a socket
            raise NotRegularFile(errno.ENXIO, "a FIFO or a socket, not a file", str(path)) from None
        raise


def _check_regular(fd: int, path: str | os.PathLike, owner: int | None) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(errno.EINVAL, _kind(info.st_mode), str(path))
    if owner is not None and info.st_uid != owner:
        raise NotRegularFile(errno.EPERM, f"owned by {_user_name(info.st_uid)}, not by {_user_name(owner)}", str(path))
    return info


def read_regular(path: str | os.PathLike, max_bytes: int, owner: int | None = None, dir_fd: int | None = None) -> bytes:
    """``path``'s bytes when it is a regular file (``owner``'s, when given) of at most ``max_bytes``.

    Opened with ``O_NOFOLLOW | O_NONBLOCK``: a symbolic link, a FIFO (which would block the
    reader forever), a device or a larger file raises :class:`NotRegularFile`, naming what it is,
    before a byte is read. ``dir_fd``: ``path`` is relative to that open folder."""
    fd = _opened(path, os.O_RDONLY, dir_fd)
    try:
        info = _check_regular(fd, path, owner)
        if info.st_size > max_bytes:
            raise NotRegularFile(errno.EFBIG, f"{info.st_size:,} bytes, more than {max_bytes:,}", str(path))
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:  # it grew while read
            raise NotRegularFile(errno.EFBIG, f"more than {max_bytes:,} bytes", str(path))
        return data
    finally:
        os.close(fd)


def open_own_log(path: str | os.PathLike) -> int:
    """An fd appending to ``path`` (made 0644 when missing): only a regular file of this user's, never a
    link's target, so a log planted as a link (to someone's ``~/.bashrc``) is refused, not written."""
    fd = _opened(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, None, 0o644)
    try:
        _check_regular(fd, path, os.geteuid())
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_directory_below(base: str | os.PathLike, parts: tuple[str, ...] | list[str]) -> int:
    """An fd of the folder ``base/part/...``, each part opened without following a link (``base`` itself as given)."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in parts:
        try:
            step = _opened(part, os.O_RDONLY | os.O_DIRECTORY, fd)
        except NotADirectoryError:  # O_DIRECTORY's answer for a link, as for a file
            link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
            what = "a symbolic link, not followed" if link else "not a folder"
            raise NotRegularFile(errno.ENOTDIR, what, part) from None
        finally:
            os.close(fd)
        fd = step
    return fd
