"""The commands a matrix run starts (uv, the smoke run): each in its own process group, with a deadline.

Each runs with the allowlisted environment of its stage (``install`` for uv's commands,
``smoke`` for the run inside the venv; see :mod:`puffer_core.matrix.environment`), so an
interrupt or a timeout ends exactly those processes and their children. Each runs in a
private temporary directory of its own (:func:`scratch_dirs`): an empty working directory
(never the caller's, where a file named like a requirement would be installed as that file,
and a pyproject.toml or uv.toml would configure uv) and a temporary ``HOME``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import IO

from puffer_core.matrix.environment import STAGES, cell_environment

__all__ = ["CellTimeout", "Interrupted", "Processes", "scratch_dirs"]


class CellTimeout(Exception):
    """A command ran past its job's deadline (and was killed)."""


class Interrupted(Exception):
    """The run is stopping (Ctrl-C or SIGTERM): no new command starts."""


@contextlib.contextmanager
def scratch_dirs() -> Iterator[tuple[str, str]]:
    """A new private directory (0700) for one command: an empty working directory and a HOME of
    its own, as ``(home, cwd)``; removed with whatever the command left there."""
    root = tempfile.mkdtemp(prefix="puffer-cell-")
    try:
        home, cwd = os.path.join(root, "home"), os.path.join(root, "cwd")
        os.mkdir(home, 0o700)
        os.mkdir(cwd, 0o700)
        yield home, cwd
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Processes:
    """The child process groups in flight, so an interrupt can end exactly those."""

    def __init__(self, pass_env: list[str] | tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen] = set()
        self.stopping = False
        self.environments = {stage: cell_environment(stage, pass_env) for stage in STAGES}

    def run(
        self,
        cmd: list[str],
        log: IO[str],
        deadline: float,
        cwd: pathlib.Path | None = None,
        stage: str = "install",
        capture_stdout: bool = False,
    ) -> tuple[int, str, str]:
        """Run ``cmd`` (in ``cwd``, else an empty temporary directory), copying its output to ``log``;
        (returncode, stdout, stderr). Raises CellTimeout."""
        if self.stopping:
            raise Interrupted()
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        with scratch_dirs() as (home, empty):
            env = {**self.environments[stage], "HOME": home}
            return self._run(cmd, log, deadline, str(cwd or empty), env, capture_stdout)

    def _run(
        self, cmd: list[str], log: IO[str], deadline: float, cwd: str, env: dict[str, str], capture_stdout: bool
    ) -> tuple[int, str, str]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CellTimeout()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if capture_stdout else subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: a timeout ends its children too
        )
        with self._lock:
            self._live.add(proc)
        try:
            out, err = proc.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            out, err = proc.communicate()
            log.write(out or "")
            log.write(err or "")
            raise CellTimeout() from None
        finally:
            with self._lock:
                self._live.discard(proc)
        err = err or ""
        if capture_stdout:
            log.write(err)
            log.write(f"[stdout]\n{out}")
        else:
            log.write(out or "")
        log.write(f"[exit code {proc.returncode}]\n")
        log.flush()
        if self.stopping:
            raise Interrupted()
        return proc.returncode, out or "", err if capture_stdout else (out or "")

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def kill_all(self) -> None:
        self.stopping = True
        with self._lock:
            for proc in list(self._live):
                self._kill(proc)
