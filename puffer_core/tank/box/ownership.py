"""Root's record of who owns which container: ``<state_dir>/<container id>.json``, written by the broker.

Which container belongs to whom is this record, not a name or a label: the broker writes it
when it makes a container (under a lock, with the terminal's signals held so that no
container is left without its record) and joins, starts, stops or removes only a container
recorded for the caller. Standard library only (and the atomic writer): it runs as root.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import stat
import time
from collections.abc import Iterator
from typing import Any

from puffer_core.atomic import write_atomically
from puffer_core.tank.errors import BrokerError

__all__ = ["HELD", "Ownership"]

#: Signals a user can send the broker through their terminal: held while a container is made and recorded.
HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP)


class Ownership:
    """``<state_dir>/<container id>.json``: the uid and name the broker made each container for."""

    def __init__(self, config: Any) -> None:
        """``config``: the broker's, whose ``state_dir`` holds the records."""
        self.dir = config.state_dir
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        info = os.lstat(self.dir)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
            raise BrokerError(f"{self.dir} is not a root-owned folder only root writes: the admin fixes it")

    def _path(self, container_id: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{64}", container_id):
            raise BrokerError(f"the engine gave the container id {container_id[:80]!r}")
        return os.path.join(self.dir, f"{container_id}.json")

    def owner(self, container_id: str) -> dict | None:
        try:
            with open(self._path(container_id), encoding="utf-8") as file:
                record = json.load(file)
        except (FileNotFoundError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def record(self, container_id: str, caller: Any, name: str) -> None:
        """``caller``: who the container is made for (its ``uid`` and ``user``)."""
        record = {"uid": caller.uid, "user": caller.user, "name": name, "created": time.time()}
        write_atomically(self._path(container_id), json.dumps(record).encode())

    def forget(self, container_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(container_id))

    def of(self, uid: int) -> dict[str, dict]:
        """Every record of ``uid``: {container id: record}."""
        found = {}
        for entry in sorted(os.listdir(self.dir)):
            if entry.endswith(".json") and re.fullmatch(r"[0-9a-f]{64}\.json", entry):
                record = self.owner(entry[:-5])
                if record is not None and record.get("uid") == uid:
                    found[entry[:-5]] = record
        return found

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One maker at a time, and no terminal signal between a container and its record."""
        with open(os.path.join(self.dir, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
            try:
                yield
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
