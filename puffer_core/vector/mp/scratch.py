"""The workers' temp dir of a Multiprocessing vector env: named after the process that owns it,
and swept when that process died without removing it.

``release`` (:mod:`.processes`) removes the folder when the vector env closes, fails or is
collected. A process killed outright (SIGKILL, the OOM killer, a power cut) runs none of
that, and its folder (with whatever its envs kept there: a NetHack game's files) stays. So
each folder's name says whose it is: ``puffer-vector-<pid namespace>-<pid>-<start time>-``
and tempfile's random part; and every vector env, as it makes its own, removes those of this
user whose owner is gone: no process of that pid, or one that started at another time (the
pid was reused). A folder of another user, of another pid namespace (a container sharing
the temp dir, whose pids mean other processes), or whose owner cannot be told apart is
left as it is.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile

__all__ = ["PREFIX", "make_scratch", "owner_gone", "process_start", "sweep_stale"]

PREFIX = "puffer-vector-"
#: What this module names a folder: namespace, pid, start time (0: unknown), tempfile's 8 characters.
_NAME = re.compile(rf"{PREFIX}(\d+)-(\d+)-(\d+)-[a-z0-9_]{{8}}")


def _stat(pid: int) -> tuple[bytes, int] | None:
    """Process ``pid``'s state letter and start time (clock ticks after boot), from
    ``/proc/PID/stat``; None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            line = file.read()
        # The command name (field 2) may hold spaces and parentheses: count from its last ")".
        fields = line[line.rindex(b")") + 2 :].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), None if unknown."""
    found = _stat(pid)
    return None if found is None else found[1]


def _pid_namespace() -> int:
    """This process's pid namespace (the inode of ``/proc/self/ns/pid``), 0 if unknown."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def make_scratch() -> str:
    """A new 0700 folder in the temp dir for this process's workers, after sweeping stale ones."""
    parent = tempfile.gettempdir()
    sweep_stale(parent)
    pid = os.getpid()
    return tempfile.mkdtemp(prefix=f"{PREFIX}{_pid_namespace()}-{pid}-{process_start(pid) or 0}-", dir=parent)


def owner_gone(namespace: int, pid: int, start: int) -> bool:
    """Whether the process a folder names is certainly gone: in this pid namespace, no process
    has that pid, or it is a zombie, or the one that has it started at another time."""
    if namespace != _pid_namespace() or namespace == 0:
        return False  # its pids are not ours to look up
    if pid == os.getpid():
        return False  # another vector env of this process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # a process of another user has that pid: alive, and perhaps a reuse (below)
    now = _stat(pid)
    if now is None:
        return False  # no /proc to tell a reused pid by: kept
    state, started = now
    return state in (b"Z", b"X") or (start != 0 and started != start)  # dead but not yet reaped, or a reuse


def sweep_stale(parent: str) -> list[str]:
    """Remove this user's vector-env folders in ``parent`` whose owner is gone; the removed paths."""
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        match = _NAME.fullmatch(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue  # a symlink, a file, or another user's: never ours to remove
        if owner_gone(*map(int, match.groups())):
            shutil.rmtree(entry.path, ignore_errors=True)  # fd-based: a symlink planted inside is not followed
            removed.append(entry.path)
    return removed
