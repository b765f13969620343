"""Files written whole or not at all.

A file someone relies on (a checkpoint, a curve, a recording, a results file) is written
to a temporary file with a unique name in the target's own directory (so the final
``os.replace`` is a rename within one file system), flushed and fsynced, then renamed over
the target; the directory is fsynced so the rename survives a power cut. A crash at any
point leaves either the old file or the new one, never half of one, and two processes
writing the same target never share a temporary file. Imports nothing of puffer_core.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "is_temporary_of",
    "make_temporary",
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
    parent = Path(target).parent if str(Path(target).parent) else Path(".")
    try:
        fd = os.open(parent, os.O_RDONLY)
    except OSError:  # a directory that cannot be opened (some network file systems): the rename stands
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
