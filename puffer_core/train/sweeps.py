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
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from puffer_core.atomic import private_directory
from puffer_core.env.postprocess import EPISODE_RETURN
from puffer_core.errors import APIUsageError, MissingDependencyError, PufferError
from puffer_core.plugins import get_plugins
from puffer_core.specs.declarations import EnvSpec
from puffer_core.specs.limits import MAX_SEED, MAX_STEPS, check_int
from puffer_core.train.curve import WINDOW, require_matplotlib
from puffer_core.train.defaults import defaults_of
from puffer_core.train.plan import plan_run
from puffer_core.train.run_lock import RunLock
from puffer_core.train.sweep_params import Param, check_params
from puffer_core.train.sweep_report import best_settings, write_best, write_plot

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

STUDY_FILE = "study.db"
STUDY_NAME = "puffer-sweep"
LOCK_NAME = ".puffer-sweep.lock"
ASK_LOCK = ".puffer-sweep-ask.lock"
MAX_TRIALS = 100_000
MAX_JOBS = 256
#: Failed trials that still count toward the total: their settings were tried, and failed.
COUNTED_FAILURES = ("diverged", "no episode")


class SweepInterrupted(PufferError):
    """Ctrl-C or SIGTERM stopped the sweep; the finished trials are kept in the study."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = signal_number
        self.exit_code = 128 + signal_number


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


@dataclass
class SweepResult:
    """A sweep's outcome: the study's trials counted and the best one's settings."""

    out: Path
    trials: int
    best: dict[str, Any] | None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"out": str(self.out), "trials": self.trials, "best": self.best, "files": self.files}


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep is (stored in the study: a re-run must be the same sweep) and how it runs."""

    env: str
    steps: int
    trials: int
    params: tuple[Param, ...]
    settings: dict[str, Any]
    env_kwargs: dict[str, Any]
    metric: str
    direction: str
    out: Path
    seed: int
    startup_trials: int
    jobs: int = 1
    #: The env's spec, looked up once in this process; trials get it, not the id (None in a
    #: worker process until it looks the id up itself: a spec's creator need not pickle).
    spec: EnvSpec | None = field(default=None, compare=False)

    def definition(self) -> dict[str, Any]:
        """The part a re-run must repeat to resume (the number of trials may change)."""
        return {
            "env": self.env,
            "steps": self.steps,
            "params": [param.spec() for param in self.params],
            "settings": self.settings,
            "env_kwargs": self.env_kwargs,
            "metric": self.metric,
            "direction": self.direction,
        }

    def resolved(self) -> SweepPlan:
        """This plan with its env's spec (looked up here when it came without one)."""
        return self if self.spec is not None else replace(self, spec=get_plugins().get_spec(self.env))


def sweep(
    env: str,
    *,
    trials: int,
    steps: int,
    params: Sequence[str | Param],
    out: str | Path,
    jobs: int = 1,
    settings: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    metric: str = EPISODE_RETURN,
    direction: str = "maximize",
    seed: int = 0,
    startup_trials: int = 5,
    on_trial: Callable[[TrialReport], None] | None = None,
) -> SweepResult:
    """Search PPO settings for ``env`` with Optuna; resumable from ``out``.

    Args:
        env: An env id (``classic/cartpole``).
        trials: Trials wanted in the study in total (a re-run does only what is missing).
        steps: Environment steps each trial trains.
        params: ``--param`` specs (``learning_rate=1e-4:1e-2:log``, ``ent_coef=0:0.05``,
            ``num_envs=8:64``, ``anneal_lr=true,false``) or ``Param`` objects.
        out: The sweep's directory: ``study.db``, ``best.json``, ``sweep.png``, ``trials/``.
        jobs: Trials run at once, each in a worker process (1: in this process).
        settings: PPO settings every trial shares (``--set``).
        env_kwargs: The env's creator kwargs.
        metric: The episode-end info key a trial is scored by (mean of its last 20 episodes).
        direction: ``maximize`` or ``minimize`` the score.
        seed: The TPE sampler's seed (the trials' own seed is ``settings["seed"]``).
        startup_trials: Trials sampled at random, and run unpruned, before TPE and the
            median pruner take over.
        on_trial: Called with a ``TrialReport`` as each trial ends.

    Returns:
        The ``SweepResult``: trials counted, the best trial's settings and the files written.

    Raises:
        APIUsageError: a bad spec, setting or count (before any trial), or a directory that
            holds another sweep or that another sweep holds.
        MissingDependencyError: optuna, torch or matplotlib is missing.
        SweepInterrupted: Ctrl-C or SIGTERM; the study keeps every finished trial.
    """
    plan = plan_sweep(
        env,
        trials=trials,
        steps=steps,
        params=params,
        out=out,
        jobs=jobs,
        settings=settings,
        env_kwargs=env_kwargs,
        metric=metric,
        direction=direction,
        seed=seed,
        startup_trials=startup_trials,
    )
    return run_sweep(plan, on_trial)


def run_sweep(plan: SweepPlan, on_trial: Callable[[TrialReport], None] | None = None) -> SweepResult:
    """Run the sweep ``plan`` (``plan_sweep``) resolved; ``sweep``'s Returns and Raises hold."""
    optuna = require_optuna()
    import puffer_core.train

    puffer_core.train.ppo  # noqa: B018  (imports torch: a one-line error here, before any trial, without it)
    require_matplotlib()
    private_directory(plan.out)
    with RunLock(plan.out, LOCK_NAME, "puffer sweep run"):
        study = _open_study(optuna, plan, create=True)
        _recover(optuna, study)
        try:
            stopped = _run_trials(plan, on_trial)
        finally:
            files = _write_reports(study, plan)
        done = _counted(study)
    if stopped:
        name = signal.Signals(stopped).name
        raise SweepInterrupted(
            f"sweep stopped by {name} with {done} of {plan.trials} trials done (kept in {plan.out / STUDY_FILE}); "
            "run the same command to go on (an interrupted trial runs again)",
            stopped,
        )
    return SweepResult(plan.out, done, best_settings(study, plan.definition()), files)


def _run_trials(plan: SweepPlan, on_trial: Callable[[TrialReport], None] | None) -> int:
    """Run the trials still missing, here or in ``plan.jobs`` workers; the signal that stopped them (0: none)."""
    try:
        with _ctrl_c_interrupts():
            if plan.jobs == 1:
                _work(plan, on_trial, worker=0)
            else:
                _work_in_processes(plan, plan.jobs, on_trial)
    except _Stopped as exc:
        return exc.signal_number
    except KeyboardInterrupt:  # between trials (a trial's own Ctrl-C is a _Stopped)
        return signal.SIGINT
    return 0


@contextlib.contextmanager
def _ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt between trials even where the process started with SIGINT
    ignored (a shell's background job), as a trial's own training stops on it; main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def plan_sweep(
    env: str,
    *,
    trials: int,
    steps: int,
    params: Sequence[str | Param],
    out: str | Path,
    jobs: int = 1,
    settings: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    metric: str = EPISODE_RETURN,
    direction: str = "maximize",
    seed: int = 0,
    startup_trials: int = 5,
) -> SweepPlan:
    """The sweep ``sweep`` runs, checked before optuna or torch is imported: its env looked up
    once, the trials' shared settings validated on top of the env's training defaults."""
    if not isinstance(env, str):
        raise APIUsageError(f"sweep needs an env id (a string such as classic/cartpole), got {env!r}")
    for name, value, high in (("trials", trials, MAX_TRIALS), ("steps", steps, MAX_STEPS), ("jobs", jobs, MAX_JOBS)):
        check_int(name, value, 1, high)
    check_int("seed", seed, 0, MAX_SEED)
    check_int("startup_trials", startup_trials, 0, MAX_TRIALS)
    if direction not in ("maximize", "minimize"):
        raise APIUsageError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    if not isinstance(metric, str) or not metric:
        raise APIUsageError(f"metric must be an episode-info key such as episode_return, got {metric!r}")
    settings = dict(settings or {})
    if "steps" in settings:
        raise APIUsageError("give the trials' steps as the sweep's steps (--steps), not as a setting")
    checked = check_params(params, settings)
    spec = get_plugins().get_spec(env)
    defaults_of(spec).config({**settings, "steps": steps})
    kwargs = dict(env_kwargs or {})
    return SweepPlan(
        env,
        steps,
        trials,
        tuple(checked),
        settings,
        kwargs,
        metric,
        direction,
        Path(out),
        seed,
        startup_trials,
        jobs,
        spec,
    )


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


def _open_study(optuna: Any, plan: SweepPlan, create: bool = False, worker: int = 0) -> Any:
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


def _recover(optuna: Any, study: Any) -> None:
    """Trials left running by a sweep that was stopped or killed: failed, and queued to run again."""
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for trial in running:
        _fail_and_requeue(optuna, study, trial.number, trial.params)


def _fail_and_requeue(optuna: Any, study: Any, number: int, params: dict[str, Any]) -> None:
    """A trial that was stopped: failed (so not counted), and its settings queued to run again
    (none when it was stopped before it drew any: there is nothing to repeat)."""
    study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
    if params:
        study.enqueue_trial(params, user_attrs={"retry_of": number})


def _counted(study: Any) -> int:
    return sum(_counts(trial) for trial in study.get_trials(deepcopy=False))


def _counts(trial: Any) -> bool:
    state = trial.state.name
    return state in ("COMPLETE", "PRUNED") or (state == "FAIL" and trial.user_attrs.get("outcome") in COUNTED_FAILURES)


# --------------------------------------------------------------------------- trials


class _Pruned(Exception):
    """Raised from a trial's update report to end its training early."""


class _Score:
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


@contextlib.contextmanager
def _ask_lock(directory: Path) -> Iterator[None]:
    """One process at a time decides whether another trial is needed and starts it."""
    with open(directory / ASK_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _next_trial(optuna: Any, study: Any, plan: SweepPlan) -> Any:
    """A new trial, or None once the counted and running trials reach the total."""
    with _ask_lock(plan.out):
        trials = study.get_trials(deepcopy=False)
        running = sum(trial.state.name == "RUNNING" for trial in trials)
        if sum(map(_counts, trials)) + running >= plan.trials:
            return None
        return study.ask({param.name: param.distribution() for param in plan.params})


def _work(plan: SweepPlan, on_trial: Callable[[TrialReport], None] | None, worker: int) -> None:
    """Run trials in this process until the study has enough."""
    optuna = require_optuna()
    study = _open_study(optuna, plan, worker=worker)
    while (trial := _next_trial(optuna, study, plan)) is not None:
        report = _run_trial(optuna, study, plan, trial)
        if on_trial is not None:
            on_trial(report)


def _run_trial(optuna: Any, study: Any, plan: SweepPlan, trial: Any) -> TrialReport:
    """Train one trial, tell the study how it ended, and report it."""
    score = _Score(plan.metric)
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


def _train_trial(optuna: Any, study: Any, plan: SweepPlan, trial: Any, score: _Score, reached: dict) -> str:
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
            raise _Pruned

    settings = {**plan.settings, **trial.params, "steps": plan.steps}
    out = plan.out / "trials" / f"{trial.number:04d}"
    try:
        run = plan_run(plan.spec or plan.env, settings=settings, env_kwargs=plan.env_kwargs, out=out)
        train_plan(run, on_update=on_update, on_episode=score.episode)
    except _Pruned:
        return "pruned"
    except TrainingDiverged:
        return "diverged"
    except (TrainingInterrupted, KeyboardInterrupt) as exc:
        _fail_and_requeue(optuna, study, trial.number, trial.params)
        raise _Stopped(getattr(exc, "signal_number", signal.SIGINT)) from None
    except BaseException:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
    return "complete"


class _Stopped(Exception):
    """A trial was stopped by a signal (its trial is already failed and requeued)."""

    def __init__(self, signal_number: int):
        super().__init__(signal_number)
        self.signal_number = signal_number


def _report(study: Any, plan: SweepPlan, number: int, params: dict, outcome: str, value: Any, step: int) -> TrialReport:
    best = best_settings(study, plan.definition())
    return TrialReport(
        number=number,
        done=_counted(study),
        total=plan.trials,
        params=dict(params),
        outcome=outcome,
        value=value,
        step=step,
        best_value=None if best is None else best["value"],
        best_number=None if best is None else best["trial"],
    )


def _write_reports(study: Any, plan: SweepPlan) -> list[str]:
    written = [str(plan.out / STUDY_FILE)]
    best = best_settings(study, plan.definition())
    if best is not None:
        written.append(str(write_best(plan.out, best)))
    if study.get_trials(deepcopy=False):
        written.append(str(write_plot(plan.out, study, plan.params, plan.definition())))
    return written


# --------------------------------------------------------------------------- parallel workers


def _worker(plan: SweepPlan, index: int, reports: Any) -> None:
    """A worker process: runs trials until the study has enough, sending each report back."""
    try:
        _work(plan.resolved(), lambda report: reports.put(("trial", asdict(report))), worker=index)
    except _Stopped as stopped:
        reports.put(("stopped", stopped.signal_number))
    except BaseException as exc:
        reports.put(("error", f"{type(exc).__name__}: {exc}" if not isinstance(exc, PufferError) else str(exc)))


def _work_in_processes(plan: SweepPlan, jobs: int, on_trial: Callable[[TrialReport], None] | None) -> None:
    """``jobs`` worker processes (spawned: this process may run threads) share the study."""
    import multiprocessing
    import queue

    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    shipped = replace(plan, spec=None)  # each worker looks the env up once itself
    workers = [context.Process(target=_worker, args=(shipped, index, reports)) for index in range(1, jobs + 1)]
    stopped, error = 0, None
    try:
        for worker in workers:
            worker.start()
        while any(worker.is_alive() for worker in workers) or not reports.empty():
            try:
                kind, payload = reports.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "trial" and on_trial is not None:
                on_trial(TrialReport(**payload))
            elif kind == "stopped":
                stopped = stopped or payload
            elif kind == "error":
                error = error or payload
    except KeyboardInterrupt:
        stopped = signal.SIGINT
    finally:
        _stop_workers(workers)
    if stopped:
        raise _Stopped(stopped)
    if error is not None:
        raise APIUsageError(f"a sweep worker failed: {error}")


def _stop_workers(workers: list[Any]) -> None:
    """Ask running workers to stop (SIGTERM: their trial stops at its next step, is failed and
    queued again), then wait; a worker that will not stop is killed. None is left behind."""
    for worker in workers:
        if worker.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.join(timeout=60)
        if worker.is_alive():
            worker.kill()
            worker.join()
