"""One run at a time per directory: ``DIR/.puffer-train.lock``, held with ``flock`` for the run.

Two ``puffer train`` runs (or a run and a ``--resume``) writing one directory would
overwrite each other's checkpoints; the second is refused, naming the pid that holds the
directory. The kernel drops the lock when its holder exits, however it exits, so a
crashed run never leaves a stale lock behind (its file stays, unlocked, and is reused); a
run that ends removes the file. The file is opened without following a symlink and used only
when it is a regular file of this user's with one link: anything else someone put under its
name is refused and left as it is (never truncated).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

from puffer_core.errors import APIUsageError

__all__ = ["LOCK_NAME", "RunLock"]

LOCK_NAME = ".puffer-train.lock"


class RunLock:
    """``with RunLock(directory):`` holds the directory for this process, or raises APIUsageError.
    ``name`` and ``holder`` (what the refusal calls the other process) serve other commands
    (``puffer sweep`` holds its directory the same way)."""

    def __init__(self, directory: str | Path, name: str = LOCK_NAME, holder: str = "puffer train run"):
        self.path = Path(directory) / name
        self.holder = holder
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise APIUsageError(
                    f"{self.path.parent} is in use by another {self.holder} (pid {pid}); wait for it to end, "
                    "or give another --out directory"
                ) from None
            if self._still_named(fd):
                break
            os.close(fd)  # the holder removed the file as we opened it: lock the one now named so
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def _open(self) -> int:
        """The lock file, created if missing; refused unless it is a regular file of ours."""
        # O_NONBLOCK: a FIFO planted under the name must not hang the open (it is refused below).
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise self._refusal("a symbolic link") from None
        info = os.fstat(fd)
        problem = _not_a_lock_of_ours(info)
        if problem:
            os.close(fd)
            raise self._refusal(problem)
        return fd

    def _refusal(self, what: str) -> APIUsageError:
        return APIUsageError(
            f"{self.path} is {what}, not a lock file of yours (left as it is); remove it if it is safe to, "
            "or give another --out directory"
        )

    def _still_named(self, fd: int) -> bool:
        try:
            return os.lstat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            self.path.unlink(missing_ok=True)  # before unlocking: a waiter then re-opens the new name
            # Unlock explicitly: a forked worker still holding the descriptor would keep the lock.
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _not_a_lock_of_ours(info: os.stat_result) -> str | None:
    """What the opened file is, when it is not a lock file this user made (None when it is)."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}"
    # A hard link to one of the user's files (their ~/.bashrc); 0 links is a lock file its
    # holder removed as this process opened it (acquire then opens the one named now).
    if info.st_nlink > 1:
        return f"a file with {info.st_nlink} links"
    return None
