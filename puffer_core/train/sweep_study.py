"""A sweep's Optuna study in ``DIR/study.db``: opened (and checked to be this sweep), trials asked for one
process at a time, counted, failed and queued again when they were stopped, and its reports written."""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from puffer_core.errors import APIUsageError, MissingDependencyError
from puffer_core.train.sweep_plan import ASK_LOCK, STUDY_FILE, STUDY_NAME, SweepPlan
from puffer_core.train.sweep_report import best_settings, write_best, write_plot

__all__ = [
    "COUNTED_FAILURES",
    "counted",
    "counts",
    "fail_and_requeue",
    "next_trial",
    "open_study",
    "recover",
    "require_optuna",
    "write_reports",
]

#: Failed trials that still count toward the total: their settings were tried, and failed.
COUNTED_FAILURES = ("diverged", "no episode")


def require_optuna() -> Any:
    """The optuna module, quiet; a one-line MissingDependencyError naming the extra without it."""
    try:
        import optuna
    except ImportError:
        raise MissingDependencyError(
            "puffer sweep needs optuna, which is missing; pip install 'puffer-core[sweep]'"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our progress line says it all
    return optuna


def open_study(optuna: Any, plan: SweepPlan, create: bool = False, worker: int = 0) -> Any:
    """The study in ``DIR/study.db``: created (and checked to be this sweep) with ``create``,
    else loaded with a sampler for ``worker``."""
    storage = optuna.storages.RDBStorage(
        f"sqlite:///{(plan.out / STUDY_FILE).resolve()}",
        engine_kwargs={"connect_args": {"timeout": 120}},  # parallel workers wait for each other's writes
    )
    if not create:
        # Seeded by the sweep's seed, the worker and the trials already there: a resumed sweep
        # or a second worker does not draw the same random settings again.
        tried = len(optuna.load_study(study_name=STUDY_NAME, storage=storage).get_trials(deepcopy=False))
        sampler = optuna.samplers.TPESampler(
            seed=(plan.seed + 7919 * worker + tried) % 2**32, n_startup_trials=plan.startup_trials
        )
        pruner = optuna.pruners.MedianPruner(n_startup_trials=plan.startup_trials, n_warmup_steps=plan.steps // 4)
        return optuna.load_study(study_name=STUDY_NAME, storage=storage, sampler=sampler, pruner=pruner)
    study = optuna.create_study(study_name=STUDY_NAME, storage=storage, direction=plan.direction, load_if_exists=True)
    stored = study.user_attrs.get("definition")
    if stored is None:
        study.set_user_attr("definition", plan.definition())
    elif stored != json.loads(json.dumps(plan.definition())):
        raise APIUsageError(
            f"{plan.out} holds another sweep ({_describe(stored)}); run that sweep's command to resume it, "
            "or give another --out"
        )
    return study


def _describe(definition: dict[str, Any]) -> str:
    params = " ".join(f"--param {spec}" for spec in definition.get("params", []))
    return f"{definition.get('env')} --steps {definition.get('steps')} {params}".strip()


def recover(optuna: Any, study: Any) -> None:
    """Trials left running by a sweep that was stopped or killed: failed, and queued to run again."""
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for trial in running:
        fail_and_requeue(optuna, study, trial.number, trial.params)


def fail_and_requeue(optuna: Any, study: Any, number: int, params: dict[str, Any]) -> None:
    """A trial that was stopped: failed (so not counted), and its settings queued to run again
    (none when it was stopped before it drew any: there is nothing to repeat)."""
    study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
    if params:
        study.enqueue_trial(params, user_attrs={"retry_of": number})


def counted(study: Any) -> int:
    return sum(counts(trial) for trial in study.get_trials(deepcopy=False))


def counts(trial: Any) -> bool:
    state = trial.state.name
    return state in ("COMPLETE", "PRUNED") or (state == "FAIL" and trial.user_attrs.get("outcome") in COUNTED_FAILURES)


@contextlib.contextmanager
def _ask_lock(directory: Path) -> Iterator[None]:
    """One process at a time decides whether another trial is needed and starts it."""
    with open(directory / ASK_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def next_trial(optuna: Any, study: Any, plan: SweepPlan) -> Any:
    """A new trial, or None once the counted and running trials reach the total."""
    with _ask_lock(plan.out):
        trials = study.get_trials(deepcopy=False)
        running = sum(trial.state.name == "RUNNING" for trial in trials)
        if sum(map(counts, trials)) + running >= plan.trials:
            return None
        return study.ask({param.name: param.distribution() for param in plan.params})


def write_reports(study: Any, plan: SweepPlan) -> list[str]:
    written = [str(plan.out / STUDY_FILE)]
    best = best_settings(study, plan.definition())
    if best is not None:
        written.append(str(write_best(plan.out, best)))
    if study.get_trials(deepcopy=False):
        written.append(str(write_plot(plan.out, study, plan.params, plan.definition())))
    return written
