"""``puffer sweep``: an Optuna search over PPO's settings, resumable, in one process or several.

Each trial trains ``ppo(env, steps, **fixed, **its params)`` into ``DIR/trials/NNNN`` (so
TensorBoard shows every trial: ``tensorboard --logdir DIR/trials``) and is scored by the
mean of ``metric`` (``episode_return`` unless told otherwise; any number of an episode-end
info works, e.g. NetHack's ``score``) over its last 20 finished episodes. That same mean,
reported after every update, is the learning curve Optuna's median pruner stops poor
trials on. The sampler is TPE, seeded.

The study lives in ``DIR/study.db`` (SQLite). ``trials`` is the total wanted: a re-run of
the same command does only what is missing. Finished, pruned and diverged trials count; a
trial that was running when the sweep was stopped (Ctrl-C, SIGTERM, a kill) is marked
failed, does not count, and runs again first. After every trial ``DIR/best.json`` holds
the best settings so far (written atomically), and ``DIR/sweep.png`` plots the search.

The parts, by job: :mod:`~puffer_core.train.sweep_plan` (what a sweep is),
:mod:`~puffer_core.train.sweep_study` (its Optuna study), :mod:`~puffer_core.train.sweep_trials`
(one trial), :mod:`~puffer_core.train.sweep_workers` (running them, here or in worker processes).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from puffer_core.atomic import private_directory
from puffer_core.errors import PufferError
from puffer_core.train.curve import require_matplotlib
from puffer_core.train.run_lock import RunLock
from puffer_core.train.sweep_plan import LOCK_NAME, STUDY_FILE, SweepPlan, plan_sweep
from puffer_core.train.sweep_report import best_settings
from puffer_core.train.sweep_study import counted, open_study, recover, require_optuna, write_reports
from puffer_core.train.sweep_trials import TrialReport
from puffer_core.train.sweep_workers import run_trials

__all__ = [
    "SweepInterrupted",
    "SweepPlan",
    "SweepResult",
    "TrialReport",
    "plan_sweep",
    "require_optuna",
    "run_sweep",
    "sweep",
]


class SweepInterrupted(PufferError):
    """Ctrl-C or SIGTERM stopped the sweep; the finished trials are kept in the study."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = signal_number
        self.exit_code = 128 + signal_number


@dataclass
class SweepResult:
    """A sweep's outcome: the study's trials counted and the best one's settings."""

    out: Path
    trials: int
    best: dict[str, Any] | None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"out": str(self.out), "trials": self.trials, "best": self.best, "files": self.files}


def sweep(env: str, *, on_trial: Callable[[TrialReport], None] | None = None, **options: Any) -> SweepResult:
    """Search PPO settings for ``env`` with Optuna; resumable from ``out``.

    Args:
        env: An env id (``classic/cartpole``).
        on_trial: Called with a ``TrialReport`` as each trial ends.
        **options: What the sweep is, as :func:`~puffer_core.train.sweep_plan.plan_sweep` takes it:
            ``trials``, ``steps``, ``params`` (``--param`` specs such as ``learning_rate=1e-4:1e-2:log``),
            ``out``, and optionally ``jobs``, ``settings``, ``env_kwargs``, ``metric``, ``direction``,
            ``seed``, ``startup_trials``.

    Returns:
        The ``SweepResult``: trials counted, the best trial's settings and the files written.

    Raises:
        APIUsageError: a bad spec, setting or count (before any trial), or a directory that
            holds another sweep or that another sweep holds.
        MissingDependencyError: optuna, torch or matplotlib is missing.
        SweepInterrupted: Ctrl-C or SIGTERM; the study keeps every finished trial.
    """
    return run_sweep(plan_sweep(env, **options), on_trial)


def run_sweep(plan: SweepPlan, on_trial: Callable[[TrialReport], None] | None = None) -> SweepResult:
    """Run the sweep ``plan`` (``plan_sweep``) resolved; ``sweep``'s Returns and Raises hold."""
    optuna = require_optuna()
    import puffer_core.train

    puffer_core.train.ppo  # noqa: B018  (imports torch: a one-line error here, before any trial, without it)
    require_matplotlib()
    private_directory(plan.out)
    with RunLock(plan.out, LOCK_NAME, "puffer sweep run"):
        study = open_study(optuna, plan, create=True)
        recover(optuna, study)
        try:
            stopped = run_trials(plan, on_trial)
        finally:
            files = write_reports(study, plan)
        done = counted(study)
    if stopped:
        name = signal.Signals(stopped).name
        raise SweepInterrupted(
            f"sweep stopped by {name} with {done} of {plan.trials} trials done (kept in {plan.out / STUDY_FILE}); "
            "run the same command to go on (an interrupted trial runs again)",
            stopped,
        )
    return SweepResult(plan.out, done, best_settings(study, plan.definition()), files)
