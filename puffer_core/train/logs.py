"""The logs a researcher reads: TensorBoard event files under ``OUT/tensorboard/`` and, when
asked, a Weights & Biases run, both with CleanRL's scalar names.

Per update, at the update's step, one event: ``charts/SPS``, ``charts/learning_rate`` and the
``losses/…`` of the update; the update's finished episodes summed up as ``charts/episodic_return``
and ``charts/episodic_length`` (their means, CleanRL's names), ``…_min`` and ``…_max``, and
``charts/episodes`` (how many ended); and ``env/KEY``: the mean over those episodes of every
other number their episode-end infos carry (NetHack's score, depth, gold…). So the files grow
by the same few hundred bytes per update however short the episodes are (one-step episodes
used to write one event each). The settings go in once per run, as TensorBoard hyperparameters
(and a text table) and as the W&B config. The files are flushed at every checkpoint and at the
end; W&B gets the same point per update, sent at each checkpoint. A resumed run continues
both: TensorBoard drops what an earlier file logged after the step it restarts from, and the
W&B run is the same one (its id kept in the run's folder), so no step is logged twice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re
import socket
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from puffer_core.atomic import write_atomically
from puffer_core.env.postprocess import EPISODE_LENGTH, EPISODE_RETURN, NOT_STATISTICS
from puffer_core.errors import APIUsageError, MissingDependencyError

__all__ = ["SCALARS", "RunLogs", "Wandb", "chain", "open_logs", "require_logs"]

#: curve row column → the scalar's name (CleanRL's)
SCALARS = {
    "steps_per_second": "charts/SPS",
    "learning_rate": "charts/learning_rate",
    "policy_loss": "losses/policy_loss",
    "value_loss": "losses/value_loss",
    "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl",
    "clip_fraction": "losses/clipfrac",
    "explained_variance": "losses/explained_variance",
}
#: Info keys that are not an env's own episode statistic.
NOT_ENV_STATS = NOT_STATISTICS | {EPISODE_RETURN, EPISODE_LENGTH, "fault"}
TENSORBOARD_DIR = "tensorboard"
#: Where a run keeps its W&B run's id, so that its resumes log into the same W&B run.
WANDB_ID_FILE = "wandb-run.json"
EPISODIC_RETURN, EPISODIC_LENGTH = "charts/episodic_return", "charts/episodic_length"
#: How many episodes ended in the update (the summaries above are over them).
EPISODES = "charts/episodes"


@dataclass(frozen=True)
class Wandb:
    """Where ``ppo(..., wandb=…)`` sends its logs: a Weights & Biases project.

    Args:
        project: The W&B project.
        entity: The W&B entity (user or team); None: the account's default.
        group: A W&B group to file the run under (e.g. one per sweep or experiment).
        name: The run's name; None: the run directory's name, else W&B's own.
    """

    project: str
    entity: str | None = None
    group: str | None = None
    name: str | None = None

    @classmethod
    def of(cls, value: Any) -> Wandb | None:
        """``value`` as a ``Wandb``: None, a project name, or a ``Wandb``."""
        if value is None or isinstance(value, Wandb):
            return value
        if isinstance(value, str) and value.strip():
            return cls(value)
        raise APIUsageError(f"wandb must be a W&B project name or puffer_core.train.Wandb(...), got {value!r}")


def require_logs(tensorboard: bool, wandb: Wandb | None) -> None:
    """Fail before training, not after, when a log cannot be written: TensorBoard's package
    for a run with a directory (``tensorboard``), wandb for a run that asks for it."""
    if tensorboard and importlib.util.find_spec("tensorboard") is None:
        raise MissingDependencyError(
            "puffer train writes TensorBoard logs with the tensorboard package, which is missing; "
            "pip install 'puffer-core[train]'"
        )
    if wandb is not None and importlib.util.find_spec("wandb") is None:
        raise MissingDependencyError(
            f"sending the run to W&B project {wandb.project!r} needs wandb, which is missing; "
            "pip install 'puffer-core[wandb]' (or leave out --wandb)"
        )


def _plain(value: Any) -> Any:
    """A hyperparameter TensorBoard and W&B both take: a number, a bool or a string."""
    return value if isinstance(value, (bool, int, float, str)) else str(value)


class _TensorBoard:
    """An event file of its own in ``directory`` (a resumed run adds one beside the first).

    Written in this thread, without SummaryWriter's writer thread and queue: handing each
    event to a thread costs more than writing it, and a process without extra threads can
    still fork (the Multiprocessing backend's worker restarts).
    """

    def __init__(self, directory: Path, start_step: int):
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.record_writer import RecordWriter

        self._event, self._summary, self._value = Event, Summary, Summary.Value
        directory.mkdir(parents=True, exist_ok=True)
        # TensorBoard reads every file with "tfevents" in its name, in name order.
        name = f"events.out.tfevents.{time.time_ns():020d}.{socket.gethostname()}.{os.getpid()}"
        self._records = RecordWriter(open(directory / name, "xb"))  # closed by close()
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))
        if start_step:
            # TensorBoard then drops what an earlier file logged after the step this resumed
            # run restarts from (written after its last checkpoint, whose state was lost).
            self._write(
                Event(wall_time=time.time(), step=start_step + 1, session_log=SessionLog(status=SessionLog.START))
            )

    def _write(self, event: Any) -> None:
        self._records.write(event.SerializeToString())

    def hyperparameters(self, settings: dict[str, Any], step: int) -> None:
        from torch.utils.tensorboard.summary import hparams, text

        table = "\n".join(f"|{key}|{value}|" for key, value in settings.items())
        summaries = [text("hyperparameters", f"|setting|value|\n|-|-|\n{table}")]
        summaries += hparams({key: _plain(value) for key, value in settings.items()}, {"charts/episodic_return": 0.0})
        for summary in summaries:
            self._write(self._event(wall_time=time.time(), step=step, summary=summary))

    def scalars(self, values: dict[str, float], step: int) -> None:
        """One event holding every value of the step."""
        summary = self._summary(value=[self._value(tag=tag, simple_value=value) for tag, value in values.items()])
        self._write(self._event(wall_time=time.time(), step=step, summary=summary))

    def update(self, values: dict[str, float], step: int) -> None:
        """The update's values, one event."""
        if values:
            self.scalars(values, step)

    def flush(self) -> None:
        self._records.flush()

    def close(self) -> None:
        self._records.close()


class _WandbRun:
    """A W&B run whose charts use the environment step (``global_step``) as their x axis.

    A resumed run continues the same W&B run: its id is kept in ``DIR/wandb-run.json``. Its
    points are sent at each checkpoint (``flush``), never before: what a crash loses after the
    last checkpoint was never sent, so the resumed run, which starts from that checkpoint,
    logs no step twice.
    """

    def __init__(self, wandb: Wandb, directory: Path | None, settings: dict[str, Any], start_step: int = 0):
        import wandb as wandb_module

        name = wandb.name or (directory.name if directory is not None else None)
        self._pending: list[dict[str, Any]] = []
        self._id_file = None if directory is None else directory / WANDB_ID_FILE
        resumed = _saved_wandb_id(self._id_file, wandb) if start_step else None
        try:
            self.run = wandb_module.init(
                project=wandb.project,
                entity=wandb.entity,
                group=wandb.group,
                name=name,
                dir=str(directory) if directory is not None else None,
                config={key: _plain(value) for key, value in settings.items()},
                settings=wandb_module.Settings(console="off"),  # our stdout and stderr stay ours
                **({"id": resumed, "resume": "allow"} if resumed else {}),
            )
        except Exception as exc:  # not logged in, no network, a bad entity: wandb's own message
            raise APIUsageError(
                f"the W&B run in project {wandb.project!r} did not start: {exc}; log in with `wandb login`, "
                "or set WANDB_MODE=offline to keep it on this machine"
            ) from None
        self.run.define_metric("global_step")
        self.run.define_metric("*", step_metric="global_step")
        if self._id_file is not None:
            record = {"id": self.run.id, "project": wandb.project, "entity": wandb.entity}
            write_atomically(self._id_file, (json.dumps(record) + "\n").encode())

    def hyperparameters(self, settings: dict[str, Any], step: int) -> None:
        pass  # the config, given at init

    def update(self, values: dict[str, float], step: int) -> None:
        """One point per update (a log call costs too much to make per episode)."""
        if values:
            self._pending.append({**values, "global_step": step})

    def flush(self) -> None:
        """Send the points since the last checkpoint (at most one per update of that interval)."""
        pending, self._pending = self._pending, []
        for point in pending:
            self.run.log(point)

    def close(self) -> None:
        self.flush()
        self.run.finish()


def _saved_wandb_id(path: Path | None, wandb: Wandb) -> str | None:
    """The W&B run id a resumed run continues: ``DIR/wandb-run.json``'s, when it is this project's."""
    if path is None or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8")[:4096])
    except (OSError, ValueError):
        return None
    run_id = record.get("id") if isinstance(record, dict) else None
    same = isinstance(record, dict) and record.get("project") == wandb.project and record.get("entity") == wandb.entity
    return run_id if same and isinstance(run_id, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", run_id) else None


class _Summary:
    """Count, sum, least and greatest of the numbers seen: what an update's episodes are logged as (bounded,
    whatever their number)."""

    __slots__ = ("count", "high", "low", "total")

    def __init__(self) -> None:
        self.count, self.total, self.low, self.high = 0, 0.0, math.inf, -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def mean(self) -> float:
        return self.total / self.count


class RunLogs:
    """Where a run's numbers go besides curve.csv; the trainer calls ``episode`` at every
    episode end, ``update`` after every update, ``flush`` at every checkpoint."""

    def __init__(self, sinks: list[Any]):
        self.sinks = sinks
        self._returns, self._lengths = _Summary(), _Summary()
        self._stats: dict[str, _Summary] = defaultdict(_Summary)
        self._last_episode = 0

    def episode(self, step: int, info: dict[str, Any]) -> None:
        if not self.sinks:
            return
        self._returns.add(float(info[EPISODE_RETURN]))
        self._lengths.add(float(info[EPISODE_LENGTH]))
        self._last_episode = step
        for key, value in info.items():
            if key not in NOT_ENV_STATS and isinstance(value, (int, float)) and math.isfinite(value):
                self._stats[key].add(float(value))

    def update(self, row: dict[str, Any]) -> None:
        if not self.sinks:
            return
        values = {name: row[column] for column, name in SCALARS.items() if row.get(column) is not None}
        self._write(values, row["step"])

    def _write(self, values: dict[str, float], step: int) -> None:
        """The update's episodes summed up, the env's statistics and ``values``, to every sink."""
        for name, seen in ((EPISODIC_RETURN, self._returns), (EPISODIC_LENGTH, self._lengths)):
            if seen.count:
                values.update({name: seen.mean(), f"{name}_min": seen.low, f"{name}_max": seen.high})
        if self._returns.count:
            values[EPISODES] = self._returns.count
        values.update({f"env/{key}": seen.mean() for key, seen in self._stats.items() if seen.count})
        self._returns, self._lengths = _Summary(), _Summary()
        self._stats.clear()
        for sink in self.sinks:
            sink.update(values, step)

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Values of the run's own at ``step`` (an evaluation's), to every sink."""
        for sink in self.sinks:
            sink.update(dict(values), step)

    def flush(self) -> None:
        for sink in self.sinks:
            sink.flush()

    def close(self) -> None:
        """Write what is summed up and close every sink (each, even if another fails)."""
        with contextlib.ExitStack() as closing:
            for sink in self.sinks:
                closing.callback(sink.close)
            if self._returns.count:  # the episodes of a run stopped between two updates
                self._write({}, self._last_episode)
        self.sinks = []


def open_logs(directory: Path | None, wandb: Wandb | None, settings: dict[str, Any], start_step: int) -> RunLogs:
    """The logs of a run: TensorBoard under ``directory/tensorboard`` (when there is a
    directory), W&B when ``wandb`` names a project; ``settings`` are its hyperparameters."""
    sinks: list[Any] = []
    try:
        if directory is not None:
            sinks.append(_TensorBoard(directory / TENSORBOARD_DIR, start_step))
        if wandb is not None:
            sinks.append(_WandbRun(wandb, directory, settings, start_step))
        for sink in sinks:
            sink.hyperparameters(settings, start_step)
    except BaseException:
        RunLogs(sinks).close()
        raise
    return RunLogs(sinks)


def chain(logged: Callable[..., None], report: Callable[..., None] | None) -> Callable[..., None]:
    """The logs' hook, then the caller's (if any): what the trainer calls."""
    if report is None:
        return logged

    def call(*args: Any) -> None:
        logged(*args)
        report(*args)

    return call
