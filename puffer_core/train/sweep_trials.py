"""One trial of a sweep: trained from the plan's env spec, scored by its metric, reported to the pruner after
every update, told to the study as it ended, and reported to whoever watches (``TrialReport``)."""

from __future__ import annotations

import collections
import math
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.train.curve import WINDOW
from puffer_core.train.plan import plan_run
from puffer_core.train.sweep_plan import SweepPlan
from puffer_core.train.sweep_report import best_settings
from puffer_core.train.sweep_study import counted, fail_and_requeue, next_trial, open_study, require_optuna

__all__ = ["Score", "Stopped", "TrialReport", "work"]


@dataclass
class TrialReport:
    """One trial's end, as the progress line shows it."""

    number: int  # Optuna's trial number
    done: int  # trials counted so far, this one included
    total: int
    params: dict[str, Any]
    outcome: str  # "complete", "pruned", "diverged" or "no episode"
    value: float | None  # the score (complete), the last reported one (pruned)
    step: int  # environment steps it trained
    best_value: float | None = None
    best_number: int | None = None


class Pruned(Exception):
    """Raised from a trial's update report to end its training early."""


class Score:
    """The mean of ``metric`` over the last ``WINDOW`` finished episodes."""

    def __init__(self, metric: str):
        self.metric = metric
        self.values: collections.deque[float] = collections.deque(maxlen=WINDOW)
        self.keys: set[str] = set()  # what the episodes carried: named when the metric is missing

    def episode(self, step: int, info: dict[str, Any]) -> None:
        if not self.keys:
            self.keys.update(key for key, value in info.items() if isinstance(value, (int, float)))
        value = info.get(self.metric)
        if isinstance(value, (int, float)) and math.isfinite(value):
            self.values.append(float(value))

    def value(self) -> float | None:
        return math.fsum(self.values) / len(self.values) if self.values else None


def work(plan: SweepPlan, on_trial: Callable[[TrialReport], None] | None, worker: int) -> None:
    """Run trials in this process until the study has enough."""
    optuna = require_optuna()
    study = open_study(optuna, plan, worker=worker)
    while (trial := next_trial(optuna, study, plan)) is not None:
        report = _run_trial(optuna, study, plan, trial)
        if on_trial is not None:
            on_trial(report)


def _run_trial(optuna: Any, study: Any, plan: SweepPlan, trial: Any) -> TrialReport:
    """Train one trial, tell the study how it ended, and report it."""
    score = Score(plan.metric)
    reached = {"step": 0}
    outcome = _train_trial(optuna, study, plan, trial, score, reached)
    value = score.value()
    if value is None and score.keys:  # episodes ended, none with the metric: every trial would miss it
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        carried = ", ".join(sorted(score.keys - {"env_id", "agent"}))
        raise APIUsageError(f"no episode of {plan.env} reports {plan.metric!r}; give --metric one of: {carried}")
    if outcome == "complete" and value is None:
        outcome = "no episode"
    trial.set_user_attr("outcome", outcome)
    trial.set_user_attr("step", reached["step"])
    if outcome == "complete":
        study.tell(trial, value)
    else:
        state = optuna.trial.TrialState.PRUNED if outcome == "pruned" else optuna.trial.TrialState.FAIL
        study.tell(trial, state=state)
    return _report(study, plan, trial.number, trial.params, outcome, value, reached["step"])


def _train_trial(optuna: Any, study: Any, plan: SweepPlan, trial: Any, score: Score, reached: dict) -> str:
    """Train ``trial``'s run from the plan's env spec (no lookup), reporting its score to the
    pruner; how it ended: "complete", "pruned" or "diverged" (a stop or a crash is raised)."""
    from puffer_core.train.run import train_plan
    from puffer_core.train.trainer import TrainingDiverged, TrainingInterrupted

    def on_update(row: dict[str, Any]) -> None:
        reached["step"] = row["step"]
        value = score.value()
        if value is None:
            return
        trial.report(value, row["step"])
        if trial.should_prune():
            raise Pruned

    settings = {**plan.settings, **trial.params, "steps": plan.steps}
    out = plan.out / "trials" / f"{trial.number:04d}"
    try:
        run = plan_run(plan.spec or plan.env, settings=settings, env_kwargs=plan.env_kwargs, out=out)
        train_plan(run, on_update=on_update, on_episode=score.episode)
    except Pruned:
        return "pruned"
    except TrainingDiverged:
        return "diverged"
    except (TrainingInterrupted, KeyboardInterrupt) as exc:
        fail_and_requeue(optuna, study, trial.number, trial.params)
        raise Stopped(getattr(exc, "signal_number", signal.SIGINT)) from None
    except BaseException:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
    return "complete"


class Stopped(Exception):
    """A trial was stopped by a signal (its trial is already failed and requeued)."""

    def __init__(self, signal_number: int):
        super().__init__(signal_number)
        self.signal_number = signal_number


def _report(study: Any, plan: SweepPlan, number: int, params: dict, outcome: str, value: Any, step: int) -> TrialReport:
    best = best_settings(study, plan.definition())
    return TrialReport(
        number=number,
        done=counted(study),
        total=plan.trials,
        params=dict(params),
        outcome=outcome,
        value=value,
        step=step,
        best_value=None if best is None else best["value"],
        best_number=None if best is None else best["trial"],
    )
