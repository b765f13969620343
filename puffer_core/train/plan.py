"""A run resolved once: what ``puffer train``, ``puffer eval`` and ``ppo()`` build, decided before
anything is built.

``plan_run(env, settings=…, env_kwargs=…, resume=…, out=…)`` looks the env id up once (its
``EnvSpec``), takes its plugin's training defaults, or a resumed run's own settings and env
kwargs (checked by :mod:`puffer_core.train.restore`), puts the caller's on top and validates
the result once: a ``RunPlan``, which the CLI prints (``describe``) and the trainer runs
(``puffer_core.train.run.train_plan``). The envs it builds get the spec, not the id
(``vector_env``), so no env is looked up again. ``plan_eval`` does the same for a saved
policy played back.

Torch-free: a new run is planned before torch loads, so a typo fails in a second. A resumed
run's plan needs its checkpoint, read once by the ``load`` the caller passes
(``puffer_core.train.checkpoint.load``, which needs torch). ``PPOConfig.validate`` runs once
per plan, and once more inside ``load`` for a checkpoint's settings, which are a file's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from puffer_core.env.environments import SpecCreator
from puffer_core.env.factory import env_name
from puffer_core.errors import APIUsageError, UnknownEnvError
from puffer_core.plugins import get_plugins
from puffer_core.specs.declarations import EnvSpec
from puffer_core.train.config import RAY_ONLY, PPOConfig
from puffer_core.train.defaults import TrainDefaults, defaults_of
from puffer_core.train.restore import adopted_settings, check_fits_machine, restored_kwargs, saved_env_spec
from puffer_core.train.saved_data import short

__all__ = ["EvalPlan", "Resumed", "RunPlan", "plan_eval", "plan_run"]

#: Reads a checkpoint (``puffer_core.train.checkpoint.load``: torch, so the caller's to pass).
Loader = Callable[[Path], Any]
CHECKPOINT_FILE = "policy.pt"  # checkpoint.FILENAME, which imports torch


@dataclass(frozen=True)
class Resumed:
    """The run a plan continues: where its checkpoint came from, the checkpoint, what it adopts."""

    source: str  # the directory or file the caller named (errors and the printed line name it)
    checkpoint: Any  # a ``Checkpoint``, read once
    adopted: dict[str, Any] = field(default_factory=dict)  # settings taken from it

    @property
    def directory(self) -> Path:
        """The run's directory (a resumed run writes there unless told otherwise)."""
        path = Path(self.source)
        return path if path.is_dir() else path.parent

    @property
    def file(self) -> Path:
        path = Path(self.source)
        return path / CHECKPOINT_FILE if path.is_dir() else path


@dataclass(frozen=True)
class _EnvPlan:
    """An env resolved: its id (or a creator), its spec (looked up once), its kwargs."""

    env: Any  # an env id, or a zero-argument creator (Python only)
    spec: EnvSpec | None  # None for a creator
    env_kwargs: dict[str, Any]
    config: PPOConfig

    @property
    def env_name(self) -> str:
        return env_name(self.env)

    def vector_env(self) -> Any:
        """What ``vector.make`` gets: a creator of the spec's env (no second lookup), or the caller's creator."""
        return SpecCreator(self.spec) if self.spec is not None else self.env


@dataclass(frozen=True)
class RunPlan(_EnvPlan):
    """A PPO run resolved: env, env kwargs, validated settings, output directory, what it resumes."""

    out: Path | None = None
    defaults: TrainDefaults | None = None  # the env's plugin's, which a new run took
    resumed: Resumed | None = None

    @property
    def saved(self) -> Any:
        """The resumed run's checkpoint (None for a new run)."""
        return None if self.resumed is None else self.resumed.checkpoint

    @property
    def continues_in_place(self) -> bool:
        """The run writes into the directory of the run it resumes (which holds its checkpoint)."""
        return self.resumed is not None and self.out is not None and _same(self.out, self.resumed.directory)

    def describe(self) -> list[str]:
        """What people are told before the run starts: the training defaults a new run takes from
        its env's plugin, or the env, kwargs and settings a resumed run takes from its checkpoint."""
        if self.resumed is None:
            return [self.defaults.describe()] if self.defaults else []
        settings = ", ".join(f"{key}={value!r}" for key, value in self.resumed.adopted.items())
        return [
            f"resuming {self.env_name!r} at step {self.saved.step:,} with {shown_kwargs(self.env_kwargs)} and the "
            f"settings {settings} (from {self.resumed.file}; --kwarg K=V and --set KEY=VALUE override)"
        ]


@dataclass(frozen=True)
class EvalPlan(_EnvPlan):
    """A saved policy's playback resolved: the env and kwargs it is played on, its checkpoint."""

    checkpoint: Any = None
    source: str = ""

    def describe(self) -> list[str]:
        """Which env and kwargs the checkpoint makes ``puffer eval`` build, said before anything is built."""
        kwargs = shown_kwargs(self.env_kwargs)
        return [f"playing {self.env_name!r} with {kwargs} (from {self.source}; --kwarg K=V overrides)"]


def plan_run(
    env: Any = None,
    *,
    settings: Mapping[str, Any] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    resume: str | Path | None = None,
    saved_kwargs: str = "check",
    out: str | Path | None = None,
    load: Loader | None = None,
) -> RunPlan:
    """The run ``ppo(env, resume=…, env_kwargs=…, out=…, **settings)`` makes, resolved once.

    Args:
        env: an env id, its ``EnvSpec`` (looked up already), a creator, or None with ``resume``.
        settings: ``PPOConfig`` fields, on top of the env's training defaults or the resumed run's.
        env_kwargs: the env's creator kwargs, on top of its plugin's ``train_kwargs`` or the saved ones.
        resume: a run's directory (or its ``policy.pt``) to continue; needs ``load``.
        saved_kwargs: ``"check"``, ``"trust"`` or ``"drop"`` the resumed run's env kwargs.
        out: the run's directory (default: the resumed run's).
        load: reads the checkpoint (``puffer_core.train.checkpoint.load``), once.

    Raises:
        APIUsageError: a bad setting, an env that is not the resumed run's, saved kwargs or
            settings refused, a run that already has its steps, an ``out`` that is a file.
        UnknownEnvError: no loaded plugin provides the env id.
    """
    settings = dict(settings or {})
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise APIUsageError(f"{out} is a file; give a directory for the run's files")
    if resume is not None:
        if load is None:
            raise APIUsageError("plan_run(resume=…) needs load= (puffer_core.train.checkpoint.load) to read it")
        return _resumed_plan(env, settings, env_kwargs, (str(resume), saved_kwargs), out, load(Path(resume)))
    if env is None:
        raise APIUsageError("give an env id (e.g. classic/cartpole) or resume=DIR")
    spec = _spec_of(env)
    defaults = defaults_of(spec) if spec is not None else TrainDefaults(env=env_name(env))
    env = spec.id if spec is not None else env
    return RunPlan(
        env,
        spec,
        defaults.kwargs(env_kwargs),
        defaults.config(settings),
        out=None if out is None else Path(out),
        defaults=defaults,
    )


def _resumed_plan(
    env: Any,
    settings: dict[str, Any],
    env_kwargs: Mapping[str, Any] | None,
    resume: tuple[str, str],
    out: str | Path | None,
    saved: Any,
) -> RunPlan:
    """A resumed run's plan: its env and kwargs, its settings under the caller's (``settings``)."""
    source, saved_kwargs = resume
    if env is not None and _id_of(env) != saved.env:
        raise APIUsageError(
            f"the run to resume was trained on {saved.env!r}, not {env_name(env)!r}; drop the env or pick its run"
        )
    spec = saved_env_spec(saved.env, source) if env is None or isinstance(env, str) else None
    kwargs = restored_kwargs(spec or env, saved.env_kwargs, env_kwargs, saved_kwargs, source)
    # Checked when read (checkpoint.load: PPOConfig.from_saved); the merged settings are validated below.
    ours = PPOConfig(**saved.config)
    # Where the saved run's Ray workers ran is no part of it: a run made on a cluster resumes
    # on this machine unless ray_address / placement are given again.
    config = ours.replace(**{**dict.fromkeys(RAY_ONLY), **settings})
    adopted = adopted_settings(ours, settings)
    check_fits_machine(config, adopted, source)
    config.validate()
    if config.steps <= saved.step and "steps" not in settings:
        raise APIUsageError(
            f"the run already has {saved.step:,} of its {config.steps:,} steps; give a larger total with steps=…"
        )
    resumed = Resumed(source, saved, adopted)
    directory = resumed.directory if out is None else Path(out)
    return RunPlan(spec.id if spec is not None else env, spec, kwargs, config, out=directory, resumed=resumed)


def plan_eval(
    run: str | Path,
    *,
    env: Any = None,
    env_kwargs: Mapping[str, Any] | None = None,
    saved_kwargs: str = "check",
    load: Loader,
) -> EvalPlan:
    """The playback ``evaluate(run, env=…, env_kwargs=…)`` makes: the checkpoint read once, its
    env looked up once (or ``env`` instead), its kwargs restored as ``saved_kwargs`` says.

    Raises:
        APIUsageError: a checkpoint that does not check out, saved kwargs refused.
        UnsafeCheckpointError: the checkpoint would run code on load.
        UnknownEnvError: no loaded plugin provides the env id.
    """
    source = str(run)
    saved = load(Path(run))
    spec = saved_env_spec(saved.env, source) if env is None else _spec_of(env)
    kwargs = restored_kwargs(spec or env, saved.env_kwargs, env_kwargs, saved_kwargs, source)
    # Checked when read (checkpoint.load: PPOConfig.from_saved).
    config = PPOConfig(**saved.config)
    return EvalPlan(spec.id if spec is not None else env, spec, kwargs, config, checkpoint=saved, source=source)


def _id_of(env: Any) -> str:
    """What a checkpoint calls ``env``: the id an alias or a plugin's id resolves to, a creator's name."""
    if not isinstance(env, str):
        return env_name(env)
    try:
        return get_plugins().get_spec(env).id
    except UnknownEnvError:
        return env


def _spec_of(env: Any) -> EnvSpec | None:
    """``env``'s spec: looked up for an id, as it is for a spec, None for a creator."""
    if isinstance(env, EnvSpec):
        return env
    if isinstance(env, str):
        return get_plugins().get_spec(env)
    if not callable(env):
        raise APIUsageError(
            f"env must be an env id (e.g. classic/cartpole) or a zero-argument creator, got {short(env)}"
        )
    return None


def _same(a: Path, b: Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def shown_kwargs(kwargs: Mapping[str, Any]) -> str:
    """Env kwargs as ``K=V, …`` (each value cut short: a checkpoint's may be anything plain)."""
    return ", ".join(f"{key}={short(value)}" for key, value in kwargs.items()) or "no kwargs"
