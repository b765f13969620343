"""Wheels of the core and of the plugins, built once per source hash and kept in ``<work>/wheels``."""

from __future__ import annotations

import os
import pathlib
import shutil
import threading
import time

from puffer_core.matrix.logs import summarize_log
from puffer_core.matrix.options import RunOptions
from puffer_core.matrix.processes import CellTimeout, Processes
from puffer_core.matrix.store import now
from puffer_core.matrix.trees import copy_tree

__all__ = ["WheelError", "Wheels"]

#: Seconds one wheel build may take.
BUILD_TIMEOUT = 600


class WheelError(Exception):
    """A wheel could not be built; every cell that needs it records ``summary`` as its install failure."""

    def __init__(self, summary: str, log: pathlib.Path):
        super().__init__(summary)
        self.summary = summary
        self.log = log


class Wheels:
    """Wheels of the core and of the plugins, built once per source hash and kept.

    Thread-safe: cells running in parallel wait for the one build of a wheel they share, and
    a failed build is remembered, not retried.
    """

    def __init__(self, options: RunOptions, uv: str, procs: Processes):
        self.options, self.uv, self.procs = options, uv, procs
        self.dir = options.work / "wheels"
        self._lock = threading.Lock()
        self._built: dict[str, pathlib.Path | WheelError] = {}

    def get(self, name: str, src: pathlib.Path, tree_hash: str, core: bool = False) -> pathlib.Path:
        key = f"{name}-{tree_hash}"
        with self._lock:
            if key not in self._built:
                try:
                    self._built[key] = self._build(key, src, core)
                except WheelError as exc:
                    self._built[key] = exc
            found = self._built[key]
        if isinstance(found, WheelError):
            raise found
        return found

    def _build(self, key: str, src: pathlib.Path, core: bool) -> pathlib.Path:
        target = self.dir / key
        existing = sorted(target.glob("*.whl")) if target.is_dir() else []
        if existing:
            return existing[0]
        staging = self.dir / f".src-{key}"
        log_path = self.options.out / "logs" / f"_wheel-{key.rsplit('-', 1)[0]}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        copy_tree(src, staging, core=core)
        tmp_out = self.dir / f".out-{key}"
        shutil.rmtree(tmp_out, ignore_errors=True)
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(f"# wheel of {src} (source hash {key.rsplit('-', 1)[1]}), {now()}\n")
            try:
                rc, out, _ = self.procs.run(
                    [self.uv, "build", "--wheel", "--quiet", "--out-dir", str(tmp_out), "--", str(staging)],
                    log,
                    time.monotonic() + BUILD_TIMEOUT,
                )
            except CellTimeout:
                raise WheelError(f"building the wheel of {src.name} took over {BUILD_TIMEOUT} s", log_path) from None
        shutil.rmtree(staging, ignore_errors=True)
        wheels = sorted(tmp_out.glob("*.whl"))
        if rc != 0 or not wheels:
            raise WheelError(f"building the wheel of {src.name} failed: {summarize_log(out)}", log_path)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp_out, target)
        return target / wheels[0].name
