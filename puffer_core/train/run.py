"""``ppo()``: one PPO run from an env id to a saved run directory.

``ppo(env, steps=…, out=…)`` resolves the run once (``puffer_core.train.plan.plan_run``: the
env's spec, a resumed run's own settings or the env family's training defaults, with the
caller's on top) and trains it (``train_plan``, which the CLI calls with the plan it
printed): the vector env, built from the plan's spec, and a ``Trainer``. With ``out`` it
keeps ``policy.pt``, ``curve.csv``, ``curve.png`` and the TensorBoard logs there, refreshed
every ``checkpoint_seconds`` and at the end, and holds the directory for the run (a second
run into it is refused). Ctrl-C or SIGTERM stops it at the next step and leaves a loadable
checkpoint (``TrainingInterrupted``); ``resume=DIR`` continues a run. A crash or a
non-finite loss or weight (``TrainingDiverged``) saves nothing: the last good checkpoint
stays in place.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Any

import torch

from puffer_core import vector
from puffer_core.atomic import private_directory
from puffer_core.errors import APIUsageError
from puffer_core.train import checkpoint as checkpoints, runs
from puffer_core.train.config import PPOConfig
from puffer_core.train.config_file import CONFIG_FILE, write_config
from puffer_core.train.curve import Curve, require_matplotlib
from puffer_core.train.evaluator import EvaluationDuringTraining
from puffer_core.train.logs import Wandb, chain, open_logs, require_logs
from puffer_core.train.plan import RunPlan, plan_run
from puffer_core.train.run_lock import RunLock
from puffer_core.train.saved_data import short
from puffer_core.train.trainer import (
    EpisodeReport,
    StopRequests,
    Trainer,
    TrainingDiverged,
    TrainingInterrupted,
    UpdateReport,
    check_rollout_fits,
    device_label,
    pick_device,
    spaces_of,
)
from puffer_core.vector.checks import available_cpus

__all__ = ["ppo", "train_plan"]


def _prepare_out(out: Path | None) -> Path | None:
    """The run's directory, made the user's own (``plan_run`` refused a file there)."""
    return None if out is None else private_directory(out)


def _check_fresh(directory: Path | None) -> None:
    """A new run never replaces another run's checkpoint (checked with the directory locked)."""
    if directory is not None and (directory / checkpoints.FILENAME).exists():
        raise APIUsageError(
            f"{directory} already holds a run (policy.pt); resume it or choose another output directory"
        )


def ppo(
    env: Any = None,
    steps: int | None = None,
    *,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
    saved_kwargs: str = "check",
    on_update: UpdateReport | None = None,
    on_episode: EpisodeReport | None = None,
    wandb: str | Wandb | None = None,
    **settings: Any,
) -> Curve:
    """Train PPO on ``env`` and return the learning curve.

    Args:
        env: an env id or a zero-argument creator (None with ``resume``: the run's own env).
        steps: environment steps in the whole run (a ``PPOConfig`` field, like ``settings``).
        out: a directory for ``policy.pt``, ``curve.csv``, ``curve.png`` and the TensorBoard
            logs (``tensorboard/``); held for the run.
        resume: a run's directory to continue: its env, env kwargs and settings (num_envs,
            num_workers, torch_threads up to what this machine runs), ``env_kwargs`` and
            ``settings`` on top; ``out`` defaults to it.
        env_kwargs: the env's creator kwargs (on top of its plugin's ``train_kwargs``).
        saved_kwargs: ``resume``'s env kwargs: ``"check"`` (restored where the env's plugin
            declares them restorable, ``EnvSpec.restorable``, else refused), ``"trust"`` (as
            they are) or ``"drop"`` (left out).
        on_update: called after every update with the curve's new row (an exception it
            raises ends the run, saving nothing).
        on_episode: called with the step and the info of every finished episode.
        wandb: a W&B project name, or ``Wandb(project, entity=…, group=…)``: the run's
            scalars and settings go there too (``pip install 'puffer-core[wandb]'``).
        **settings: ``PPOConfig`` fields (``num_envs``, ``backend``, ``batch_size``, ``policy``, ``seed``, …),
            on top of the env's ``train_defaults`` (its plugin's ``EnvSpec``).

    Returns:
        The ``Curve``: a row per update (merged pairwise past ``MAX_ROWS``), every finished
        episode in bins over steps, and the last ``RECENT`` episodes as they were.

    Raises:
        APIUsageError: a bad setting (one line naming it), a directory another run holds or
            that holds another run, a checkpoint that does not fit.
        MissingDependencyError: matplotlib or tensorboard (with ``out``), or wandb (with
            ``wandb``), is not installed; raised before anything is built.
        UnsafeCheckpointError: ``resume``'s checkpoint would run code on load.
        TrainingDiverged: a loss, gradient or weight became NaN or infinite (nothing saved:
            the last finite checkpoint stays).
        TrainingInterrupted: Ctrl-C or SIGTERM (the checkpoint is saved first).
    """
    if steps is not None:
        settings["steps"] = steps
    plan = plan_run(
        env,
        settings=settings,
        env_kwargs=env_kwargs,
        resume=resume,
        saved_kwargs=saved_kwargs,
        out=out,
        load=checkpoints.load,
    )
    return train_plan(plan, on_update=on_update, on_episode=on_episode, wandb=wandb)


def train_plan(
    plan: RunPlan,
    *,
    on_update: UpdateReport | None = None,
    on_episode: EpisodeReport | None = None,
    wandb: str | Wandb | None = None,
) -> Curve:
    """Train the run ``plan`` (``puffer_core.train.plan.plan_run``) resolved; ``ppo``'s Args,
    Returns and Raises hold."""
    config = plan.config
    check_rollout_fits(config, config.num_envs, 0)  # at least one row per env, whatever it observes
    device = pick_device(config.device)
    wandb = Wandb.of(wandb)
    if plan.out is not None:
        require_matplotlib()
    require_logs(plan.out is not None, wandb)
    directory = _prepare_out(plan.out)
    registration = None if directory is None else runs.Registration(directory, plan.env_name, config.steps)
    with contextlib.ExitStack() as held:
        if directory is not None:
            held.enter_context(RunLock(directory))
            if not plan.continues_in_place:
                _check_fresh(directory)
        try:
            trainer, stop = _train(plan, device, directory, (on_update, on_episode, wandb), registration)
        except TrainingDiverged as exc:
            _ended(registration, "failed", exc.step, f"{exc}")
            raise TrainingDiverged(f"{exc}{_diverged_advice(directory)}", exc.step) from None
        except BaseException as exc:
            _ended(registration, "failed", None, f"{type(exc).__name__}: {exc}"[:500])
            raise
        _ended(registration, _end_state(stop), trainer.step)
    if stop:
        where = f"; checkpoint in {directory} (continue with `puffer train --resume {directory}`)" if directory else ""
        name = signal.Signals(stop.signal_number).name
        raise TrainingInterrupted(
            f"training stopped by {name} at step {trainer.step:,}{where}", trainer.curve, stop.signal_number
        )
    return trainer.curve


def _end_state(stop: StopRequests) -> str:
    """Ctrl-C is the user's stop; a SIGTERM nobody asked for (``puffer runs stop`` asks) is an interruption."""
    if not stop:
        return "finished"
    return "stopped" if stop.signal_number == signal.SIGINT else "interrupted"


def _ended(registration: runs.Registration | None, state: str, step: int | None, error: str | None = None) -> None:
    if registration is not None:
        registration.end(state, step, error)


def _diverged_advice(directory: Path | None) -> str:
    kept = ""
    if directory is not None and (directory / checkpoints.FILENAME).exists():
        kept = f"; {directory / checkpoints.FILENAME} keeps the last finite checkpoint"
    return f"{kept}; lower learning_rate or max_grad_norm, or check the env's rewards for NaN and inf"


def _train(
    plan: RunPlan,
    device: torch.device,
    directory: Path | None,
    reports: tuple[UpdateReport | None, EpisodeReport | None, Wandb | None],
    registration: runs.Registration | None = None,
) -> tuple[Trainer, StopRequests]:
    """Build the envs and the trainer, train, and save at the end or on a stop request (never
    after an exception: a crash or a divergence leaves the last good checkpoint in place).
    The logs are written whatever happens."""
    on_update, on_episode, wandb = reports
    config = plan.config
    torch.manual_seed(config.seed)
    stop = StopRequests()
    with _vector_envs(plan) as envs, stop.installed():
        trainer = Trainer(envs, config, device, stop)
        threads = config.torch_threads or (available_cpus() if trainer.policy.encoder.has_image else 1)
        torch.set_num_threads(threads)
        if plan.saved is not None:
            _check_spaces(plan.saved, envs)
            trainer.restore(plan.saved)
        if directory is not None:  # once the envs are up: a run that cannot start leaves its folder empty
            # The run's complete settings, to repeat it from (puffer train --config OUT/config.toml).
            env = plan.env if isinstance(plan.env, str) else None
            write_config(directory / CONFIG_FILE, env, config, plan.env_kwargs, device=device_label(device))
        if registration is not None:
            registration.start(trainer.step)
        with contextlib.closing(open_logs(directory, wandb, _logged_settings(plan), trainer.step)) as logs:
            trainer.on_episode = chain(logs.episode, on_episode)

            def save() -> None:
                logs.flush()
                if directory is not None:
                    checkpoints.save(directory, trainer.checkpoint(plan.env_name, plan.env_kwargs))
                    trainer.curve.write(directory, f"{plan.env_name}: PPO, seed {config.seed}")
                if registration is not None:
                    registration.checkpoint(trainer.step)

            evaluation = EvaluationDuringTraining(plan, trainer, directory, logs)
            beat = None if registration is None else registration.beat
            hooks = [hook for hook in (logs.update, evaluation, beat, on_update) if hook is not None]
            try:
                trainer.train(lambda row: [hook(row) for hook in hooks], save)
                save()
            finally:
                evaluation.close()
    return trainer, stop


def _vector_envs(plan: RunPlan) -> vector.VectorEnv:
    """The run's envs, built from the env's spec as the plan resolved it (no second lookup)."""
    config = plan.config
    return vector.make(
        plan.vector_env(),
        num_envs=config.num_envs,
        # a plugin's num_workers (e.g. NetHack's 2) stays in the settings of a run moved to serial
        num_workers=None if config.backend == "serial" else config.num_workers,
        batch_size=config.batch_size,
        backend=config.backend,
        autoreset=config.autoreset,
        seed=config.seed,
        on_fault=config.on_fault,
        vector_kwargs={**(_ray_kwargs(config) or {}), **({"native": True} if config.native else {})} or None,
        **plan.env_kwargs,
    )


def _logged_settings(plan: RunPlan) -> dict[str, Any]:
    """The run's settings as the logs (TensorBoard's hparams, W&B's config) keep them."""
    kwargs = {f"env_kwargs.{key}": value for key, value in plan.env_kwargs.items()}
    return {"env": plan.env_name, **plan.config.to_dict(), **kwargs}


def _ray_kwargs(config: PPOConfig) -> dict[str, Any] | None:
    """The Ray backend's ``address`` and ``placement`` the settings give (None: neither)."""
    chosen = {"address": config.ray_address, "placement": config.placement}
    return {key: value for key, value in chosen.items() if value is not None} or None


def _check_spaces(saved: checkpoints.Checkpoint, envs: vector.VectorEnv) -> None:
    now = spaces_of(envs)
    for key in ("observation", "action"):
        if saved.spaces.get(key) != now[key]:
            raise APIUsageError(
                f"the run to resume was trained with flat {key} space {short(saved.spaces.get(key))}, but "
                f"{saved.env!r} now gives {now[key]}; its policy does not fit (did the env's version or kwargs change?)"
            )
