"""A user's runs on this box: a small registry under their home, each record written whole.

Every ``puffer train`` with a run directory keeps a record in
``$XDG_STATE_HOME/puffer/runs/`` (``~/.local/state/puffer/runs/``), one JSON file per run
directory: its env, the steps asked for and done, steps/s, when it last saved a
checkpoint, where it runs (the box and the PufferTank container) and which process runs
it, and how it ended. ``puffer runs`` reads them; the state it shows is the record's,
except that a run whose process vanished without finishing (a crash, a power loss, an ssh
session that took it down) reads ``interrupted``.

A process is named by its pid *and* its start time (a pid is reused), and a *boot* by the
kernel's boot id and the start time of PID 1 (in a container, its own init: a container
restarted by its engine is a new boot though the kernel is the same). Records are changed
under a lock (``fcntl.flock`` on the record's ``.lock`` file) and written through
:func:`~puffer_core.atomic.write_atomically`. Torch-free: ``puffer runs`` works without
the ``train`` extra.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from puffer_core.atomic import private_directory, read_regular, write_atomically
from puffer_core.errors import PufferError

__all__ = [
    "AUTO_RESUME_QUICK_SECONDS",
    "MAX_QUICK_FAILURES",
    "RunRecord",
    "boot_key",
    "forget",
    "place",
    "process_alive",
    "process_start",
    "read_all",
    "record_path",
    "registry_dir",
    "update",
]

FORMAT = 1
#: A resumed run that ends again within this many seconds failed quickly (a crash loop's step).
AUTO_RESUME_QUICK_SECONDS = 60.0
#: Quick failures in a row after which automatic resumes give up on a run.
MAX_QUICK_FAILURES = 3
#: How often a running run writes a sign of life into its record (besides its checkpoints).
BEAT_SECONDS = 15.0
#: The resumes a record remembers (the newest).
KEPT_RESUMES = 10
#: A record larger than this is not one (they are a few hundred bytes).
MAX_BYTES = 256 * 1024
STATES = ("running", "finished", "stopped", "failed", "interrupted", "gave-up")


def registry_dir(environ: dict[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/puffer/runs`` (``~/.local/state/puffer/runs``)."""
    environ = os.environ if environ is None else environ
    state = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "puffer" / "runs"


def record_path(out: str | os.PathLike, directory: Path | None = None) -> Path:
    """The record of run directory ``out`` (its absolute, resolved path names it)."""
    key = hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:24]
    return (directory or registry_dir()) / f"{key}.json"


def _read_first(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read(4096)
    except OSError:
        return ""


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc's field 22), None when there is none."""
    text = _read_first(f"/proc/{pid}/stat")
    fields = text.rpartition(")")[2].split()  # after the command's name, which may hold spaces
    if len(fields) < 20 or fields[0] == "Z":  # a zombie has finished
        return None
    return int(fields[19])


def boot_key() -> str:
    """This boot: the kernel's boot id and PID 1's start time (a container's own init, in a container)."""
    return f"{_read_first('/proc/sys/kernel/random/boot_id').strip()}:{process_start(1)}"


def place(environ: dict[str, str] | None = None) -> str:
    """Where a run runs: the box, and the PufferTank container when in one (the broker names both)."""
    environ = os.environ if environ is None else environ
    box = environ.get("PUFFERTANK_BOX") or socket.gethostname()
    container = environ.get("PUFFERTANK_CONTAINER")
    return f"{box}/{container}" if container else box


def process_alive(record: dict[str, Any], here: str | None = None, boot: str | None = None) -> bool | None:
    """Whether the record's process still runs: True, False, or None when it runs elsewhere (cannot tell)."""
    if record.get("place") != (here or place()):
        return None
    if record.get("boot") != (boot or boot_key()):
        return False
    pid = record.get("pid")
    return isinstance(pid, int) and pid > 0 and process_start(pid) == record.get("pid_start")


@dataclass(frozen=True)
class RunRecord:
    """A record as ``puffer runs`` shows it: the stored fields and the state read off them."""

    path: Path
    data: dict[str, Any]
    state: str
    alive: bool | None

    @property
    def out(self) -> str:
        return str(self.data.get("out", "?"))


def shown_state(data: dict[str, Any], here: str | None = None, boot: str | None = None) -> tuple[str, bool | None]:
    """The state to show, and whether its process runs: a ``running`` record whose process vanished is interrupted."""
    state = data.get("state")
    state = state if state in STATES else "interrupted"
    alive = process_alive(data, here, boot) if state == "running" else False
    if state == "running" and alive is False:
        return "interrupted", False
    return state, alive


_NUMBER = (int, float)
_NONE = type(None)
#: The types of each field a record may hold: a record whose field has another type is not one (records are
#: files in a user's home, and root's ``puffer fleet facts`` reads them too). Unknown fields are left alone.
FIELDS: dict[str, tuple[type, ...]] = {
    "format": (int,), "out": (str,), "env": (str, _NONE), "state": (str,), "place": (str, _NONE),
    "boot": (str, _NONE), "log": (str, _NONE), "error": (str, _NONE), "pid": (int, _NONE),
    "pid_start": (int, _NONE), "step": (int, _NONE), "steps_total": (int, _NONE), "sps": (*_NUMBER, _NONE),
    "heartbeat": (*_NUMBER, _NONE), "started": (*_NUMBER, _NONE), "started_run": (*_NUMBER, _NONE),
    "ended": (*_NUMBER, _NONE), "updated": (*_NUMBER, _NONE), "checkpoint_time": (*_NUMBER, _NONE),
    "detached": (bool,), "auto_resume": (bool,), "stop_requested": (bool,), "quick_failures": (int,),
    "resumes": (list,), "resume_args": (list,), "not_resumed": (str, _NONE),
}  # fmt: skip


def record_problem(data: object) -> str | None:
    """Why ``data`` is not a run record (None: it is one)."""
    if not isinstance(data, dict):
        return f"holds a JSON {type(data).__name__}, not a record"
    if data.get("format") != FORMAT:
        return f"is not a record of format {FORMAT}"
    for key, types in FIELDS.items():
        if key in data and not isinstance(data[key], types):
            return f"its {key} is {json.dumps(data[key])[:40]}, not a {' or '.join(t.__name__ for t in types)}"
    if not all(isinstance(item, dict) for item in data.get("resumes") or []):
        return "its resumes are not records of resumes"
    if not all(isinstance(item, str) for item in data.get("resume_args") or []):
        return "its resume_args are not words"
    return None


def _load_at(name: str, dir_fd: int | None, owner: int | None) -> dict[str, Any]:
    """The record ``name`` (in the folder ``dir_fd``), read without following a link or blocking; OSError or
    ValueError saying why it is not one."""
    raw = read_regular(name, MAX_BYTES, owner=owner, dir_fd=dir_fd)
    data = json.loads(raw)
    problem = record_problem(data)
    if problem is not None:
        raise ValueError(problem)
    return data


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return _load_at(str(path), None, None)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        warnings.warn(f"{path} is not a run record ({_why(exc)}): left out", RuntimeWarning, stacklevel=3)
        return None


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).split(": line ")[0] if isinstance(exc, json.JSONDecodeError) else str(exc)


def scan(
    directory: Path, dir_fd: int, owner: int | None = None, problems: list[str] | None = None
) -> list[tuple[Path, dict[str, Any]]]:
    """Each record in the open folder ``dir_fd`` (``owner``'s only, when given): one that is not a regular file,
    not JSON or not a record is named in ``problems`` and left out, never followed, waited on or raised."""
    found = []
    for name in sorted(os.listdir(dir_fd)):
        if not name.endswith(".json") or name.startswith("."):  # ".x.tmp.json": a record being written
            continue
        try:
            found.append((directory / name, _load_at(name, dir_fd, owner)))
        except FileNotFoundError:
            continue  # removed meanwhile
        except (OSError, ValueError, RecursionError) as exc:
            if problems is not None:
                problems.append(f"{directory / name}: {_why(exc)}")
    return found


def read_all(directory: Path | None = None, problems: list[str] | None = None) -> list[RunRecord]:
    """Every record of the registry whose run directory still exists, newest first; a file that is not one is
    named in ``problems`` (a warning when None) and left out."""
    directory = directory or registry_dir()
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    said: list[str] = [] if problems is None else problems
    try:
        entries = scan(directory, fd, problems=said)
    finally:
        os.close(fd)
    if problems is None:
        for problem in said:
            warnings.warn(f"{problem}: not a run record, left out", RuntimeWarning, stacklevel=2)
    here, boot = place(), boot_key()
    found = []
    for path, data in entries:
        if not Path(data.get("out", "")).is_dir():
            continue
        state, alive = shown_state(data, here, boot)
        found.append(RunRecord(path, data, state, alive))
    return sorted(found, key=lambda record: -float(record.data.get("started") or 0))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    private_directory(path.parent)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def update(out: str | os.PathLike, change: Callable[[dict[str, Any]], None], directory: Path | None = None) -> dict:
    """Change run ``out``'s record with ``change(data)`` under its lock, write it whole, return it."""
    path = record_path(out, directory)
    with _locked(path):
        data = _load(path) or {"format": FORMAT, "out": str(Path(out).resolve())}
        change(data)
        data["format"], data["updated"] = FORMAT, time.time()
        write_atomically(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    return data


def forget(out: str | os.PathLike, directory: Path | None = None) -> bool:
    """Remove run ``out``'s record (under its lock); whether there was one. The run's folder is not touched."""
    path = record_path(out, directory)
    if not path.exists():
        return False
    with _locked(path):
        path.unlink(missing_ok=True)
    path.with_suffix(".lock").unlink(missing_ok=True)
    return True


def read(out: str | os.PathLike, directory: Path | None = None) -> dict[str, Any] | None:
    """Run ``out``'s record, None when it has none."""
    return _load(record_path(out, directory))


class Registration:
    """The record a run keeps while it runs: who runs it, its progress at each checkpoint, how it ended.

    A registry that cannot be written (a read-only home) costs one warning, never the run.
    """

    def __init__(self, out: str | os.PathLike, env: str, steps: int, directory: Path | None = None) -> None:
        self.out, self.env, self.steps, self.directory = Path(out), env, steps, directory
        self._last: tuple[float, int] | None = None
        self._broken = False
        self._beat: float | None = None  # the first update writes at once: `puffer runs` shows its steps/s

    def _update(self, change: Callable[[dict[str, Any]], None]) -> None:
        if self._broken:
            return
        try:
            update(self.out, change, self.directory)
        except (OSError, PufferError) as exc:
            self._broken = True
            warnings.warn(f"the run's record in {registry_dir()} cannot be written ({exc}); puffer runs will not "
                          "list this run", RuntimeWarning, stacklevel=3)  # fmt: skip

    def start(self, step: int) -> None:
        now, pid = time.time(), os.getpid()

        def started(data: dict[str, Any]) -> None:
            if data.get("pid") != pid:  # not launched for us (`--detach` writes the pid first): no stop asked yet
                data["stop_requested"] = False
            data.update(state="running", env=self.env, steps_total=self.steps, step=step, pid=pid,
                        pid_start=process_start(pid), boot=boot_key(), place=place(), started_run=now,
                        heartbeat=now, error=None, ended=None)  # fmt: skip
            data.setdefault("started", now)

        self._update(started)
        self._last = (time.monotonic(), step)

    def checkpoint(self, step: int) -> None:
        """A checkpoint was written at ``step``: the record's progress, steps/s since the last one."""
        now = time.monotonic()
        sps = None
        if self._last is not None and now > self._last[0]:
            sps = (step - self._last[1]) / (now - self._last[0])
        self._last = (now, step)

        def saved(data: dict[str, Any]) -> None:
            data.update(step=step, checkpoint_time=time.time(), heartbeat=time.time())
            if sps is not None:
                data["sps"] = round(sps, 1)

        self._update(saved)

    def beat(self, row: dict[str, Any]) -> None:
        """An update happened (the trainer's row): a sign of life with the step and steps/s, written at the first
        update and then at most every :data:`BEAT_SECONDS`."""
        now = time.monotonic()
        if self._beat is not None and now - self._beat < BEAT_SECONDS:
            return
        self._beat = now

        def beaten(data: dict[str, Any]) -> None:
            data.update(heartbeat=time.time(), step=row.get("step", data.get("step")))
            if row.get("steps_per_second") is not None:
                data["sps"] = round(float(row["steps_per_second"]), 1)

        self._update(beaten)

    def end(self, state: str, step: int | None = None, error: str | None = None) -> None:
        """How the run ended; ``interrupted`` for a stop nobody asked for (``puffer runs stop`` asks)."""

        def ended(data: dict[str, Any]) -> None:
            final = "stopped" if state == "interrupted" and data.get("stop_requested") else state
            data.update(state=final, ended=time.time(), heartbeat=time.time(), error=error)
            if step is not None:
                data["step"] = step

        self._update(ended)
