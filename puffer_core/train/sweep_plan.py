"""What a sweep is: its plan (stored in its study: a re-run must be the same sweep), checked before optuna
or torch is imported, and the files it keeps in its folder."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from puffer_core.env.postprocess import EPISODE_RETURN
from puffer_core.errors import APIUsageError
from puffer_core.plugins import get_plugins
from puffer_core.specs.declarations import EnvSpec
from puffer_core.specs.limits import MAX_SEED, MAX_STEPS, check_int
from puffer_core.train.defaults import defaults_of
from puffer_core.train.sweep_params import Param, check_params

__all__ = ["ASK_LOCK", "LOCK_NAME", "STUDY_FILE", "STUDY_NAME", "SweepPlan", "plan_sweep"]

STUDY_FILE = "study.db"
STUDY_NAME = "puffer-sweep"
LOCK_NAME = ".puffer-sweep.lock"
ASK_LOCK = ".puffer-sweep-ask.lock"
MAX_TRIALS = 100_000
MAX_JOBS = 256
#: Failed trials that still count toward the total: their settings were tried, and failed.
COUNTED_FAILURES = ("diverged", "no episode")


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
    once, the trials' shared settings validated on top of the env's training defaults.

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

    Raises:
        APIUsageError: a bad spec, setting or count.
    """
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
