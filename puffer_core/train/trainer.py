"""PPO through ``puffer_core.vector``, in the CleanRL tradition: one readable loop.

``ppo(env, steps=…, out=…)`` builds the vector env, a ``Policy`` for its flat spaces (an MLP,
or ``policy="lstm"``) and an Adam optimizer, then alternates rollouts (``Collector`` fills a
``Rollout``: full or async batches, next-step or same-step autoreset, agent masks, one
recurrent state per row) and clipped-surrogate updates, keeping a ``Curve``. With ``out`` it keeps
``policy.pt``, ``curve.csv`` and ``curve.png`` there, refreshed every
``checkpoint_seconds`` and at the end, and holds the directory for the run (a second run
into it is refused). Ctrl-C or SIGTERM stops it at the next step and leaves a loadable
checkpoint (``TrainingInterrupted``); ``resume=DIR`` continues a run. A crash or a
non-finite loss or weight (``TrainingDiverged``) saves nothing: the last good checkpoint
stays in place.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from puffer_core import vector
from puffer_core.errors import APIUsageError, PufferError
from puffer_core.train import checkpoint as checkpoints
from puffer_core.train.collect import Collector
from puffer_core.train.config import PPOConfig
from puffer_core.train.curve import Curve, require_matplotlib
from puffer_core.train.defaults import train_defaults
from puffer_core.train.logs import Wandb, chain, open_logs, require_logs
from puffer_core.train.policy import ActionDistribution, Policy
from puffer_core.train.rollout import Rollout, advantages
from puffer_core.train.run_lock import RunLock
from puffer_core.vector.checks import available_cpus

__all__ = ["TrainingDiverged", "TrainingInterrupted", "UpdateReport", "ppo"]


class TrainingInterrupted(PufferError):
    """Ctrl-C or SIGTERM stopped training; the checkpoint (when there is an ``out``) is saved."""

    def __init__(self, message: str, curve: Curve, signal_number: int):
        super().__init__(message)
        self.curve = curve
        self.signal_number = signal_number
        self.exit_code = 128 + signal_number  # the shell's convention: 130 for Ctrl-C, 143 for SIGTERM


class TrainingDiverged(PufferError):
    """A loss, gradient or weight stopped being finite; training stopped without saving it."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


UpdateReport = Callable[[dict[str, Any]], None]
#: called with the step and the info of every finished episode
EpisodeReport = Callable[[int, dict[str, Any]], None]


def pick_device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError:
        raise APIUsageError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise APIUsageError(f"device {device!r} asked for, but torch sees no CUDA device here; use --device cpu")
    return chosen


def env_name(env: Any) -> str:
    if isinstance(env, str):
        return env
    return getattr(env, "__qualname__", None) or getattr(env, "__name__", None) or repr(env)


def spaces_of(envs: vector.VectorEnv) -> dict[str, str]:
    return {"observation": repr(envs.single_observation_space), "action": repr(envs.single_action_space)}


class _StopRequests:
    """Turns SIGINT / SIGTERM into a flag the loop checks between steps (a second Ctrl-C
    still interrupts at once). Installed only in the main thread, where signals arrive."""

    def __init__(self) -> None:
        self.signal_number = 0
        self._previous: dict[int, Any] = {}

    def _handle(self, number: int, frame: Any) -> None:
        if number == signal.SIGINT and self.signal_number:
            raise KeyboardInterrupt
        self.signal_number = number

    @contextlib.contextmanager
    def installed(self) -> Iterator[_StopRequests]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        for number in (signal.SIGINT, signal.SIGTERM):
            self._previous[number] = signal.signal(number, self._handle)
        try:
            yield self
        finally:
            for number, handler in self._previous.items():
                signal.signal(number, handler)

    def __bool__(self) -> bool:
        return bool(self.signal_number)


class Trainer:
    """The state of one run: envs, policy, optimizer, counters and curve."""

    def __init__(self, envs: vector.VectorEnv, config: PPOConfig, device: torch.device, stop: _StopRequests):
        self.envs, self.config, self.device, self.stop = envs, config, device, stop
        layout = getattr(envs.driver_env, "obs_layout", None)
        if layout is None:
            raise APIUsageError(f"{env_name(envs)}: the trainer needs an emulated env (one with an obs_layout)")
        self.policy = Policy(layout, envs.single_action_space, config.hidden_size, config.policy).to(device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=config.learning_rate, eps=1e-5, foreach=True)
        self.curve = Curve()
        self.on_episode: EpisodeReport | None = None
        self.step = 0
        self.seconds = 0.0
        space = envs.single_action_space
        box = isinstance(space, spaces.Box)
        self._action_low = space.low if box else None
        self._action_high = space.high if box else None
        observed = envs.single_observation_space
        _check_rollout_fits(config, envs.num_envs, observed.dtype.itemsize * int(np.prod(observed.shape)))
        state = self.policy.initial_state(1, device)
        self.rollout = Rollout(
            config.rollout_steps,
            envs.num_envs,
            observed.shape,
            observed.dtype,
            () if isinstance(space, spaces.Discrete) else space.shape,
            torch.float32 if box else torch.int64,
            device,
            state_shape=None if state is None else tuple(state.shape[1:]),
        )
        self.collector = Collector(
            envs, self.policy, self.rollout, config.autoreset, device, self._env_actions, self.learner_rewards
        )

    # ---------------------------------------------------------------- state
    def restore(self, saved: checkpoints.Checkpoint) -> None:
        self.policy.load_state_dict(saved.policy)
        if saved.optimizer is not None:
            self.optimizer.load_state_dict(saved.optimizer)
        self.step, self.seconds = saved.step, saved.seconds
        self.curve = Curve.from_state(saved.curve)

    def checkpoint(self, env: Any, env_kwargs: dict[str, Any]) -> checkpoints.Checkpoint:
        return checkpoints.Checkpoint(
            env=env_name(env),
            env_kwargs=env_kwargs,
            config=self.config.to_dict(),
            policy=self.policy.state_dict(),
            optimizer=self.optimizer.state_dict(),
            step=self.step,
            seconds=self.seconds,
            curve=self.curve.to_state(),
            spaces=spaces_of(self.envs),
        )

    # ---------------------------------------------------------------- the loop
    def train(self, on_update: UpdateReport | None, save: Callable[[], None] | None) -> None:
        config = self.config
        self.collector.start(config.seed + self.step)  # a resumed run plays new episodes
        last_save = time.perf_counter()
        while self.step < config.steps and not self.stop and not self.out_of_time():
            started = time.perf_counter()
            self.collect()
            if self.stop:
                break
            stats = self.update()
            self.check_weights()
            elapsed = time.perf_counter() - started
            self.seconds += elapsed
            row = self.curve.add_row(
                step=self.step,
                seconds=round(self.seconds, 3),
                steps_per_second=round(self.rollout.complete / elapsed, 1),
                learning_rate=self.optimizer.param_groups[0]["lr"],
                **stats,
            )
            if on_update is not None:
                on_update(row)
            if save is not None and time.perf_counter() - last_save >= config.checkpoint_seconds:
                save()
                last_save = time.perf_counter()

    def collect(self) -> None:
        """Fill the rollout until a row has ``rollout_steps`` steps (see :mod:`puffer_core.train.collect`)."""
        collector = self.collector
        self.rollout.begin()
        collector.act()
        while not self.stop:
            batch = self.envs.recv()
            self.step += collector.record(batch)
            infos = batch[4]
            for info in infos:
                ended = info.get("final_info", info)  # same-step autoreset: the ended episode's info
                if "episode_return" in ended:
                    episode = (self.step, float(ended["episode_return"]), int(ended["episode_length"]))
                    self.curve.episodes.append(episode)
                    if self.on_episode is not None:
                        self.on_episode(self.step, ended)
            if collector.full:
                break
            collector.act()

    def learner_rewards(self, rewards: torch.Tensor) -> torch.Tensor:
        """The env's rewards scaled and clipped as ``reward_scale`` and ``reward_clip`` say."""
        config = self.config
        if config.reward_scale != 1.0:
            rewards = rewards * config.reward_scale
        if config.reward_clip is not None:
            rewards = rewards.clamp(-config.reward_clip, config.reward_clip)
        return rewards

    def progress(self) -> float:
        """How much of the run is done (0 to 1): of its steps, or of ``max_seconds`` if further."""
        done = self.step / self.config.steps
        if self.config.max_seconds is not None:
            done = max(done, self.seconds / self.config.max_seconds)
        return done

    def out_of_time(self) -> bool:
        return self.config.max_seconds is not None and self.seconds >= self.config.max_seconds

    def _env_actions(self, action: torch.Tensor) -> np.ndarray:
        actions = action.cpu().numpy()
        if self._action_low is not None:  # the Gaussian's samples may leave the Box
            actions = np.clip(actions, self._action_low, self._action_high)
        return actions

    def update(self) -> dict[str, float]:
        """One PPO update on the rollout (steps that count only); returns its statistics."""
        config, r = self.config, self.rollout
        if config.anneal_lr:
            fraction = max(0.0, 1.0 - self.progress())
            self.optimizer.param_groups[0]["lr"] = config.learning_rate * max(fraction, 0.02)
        self.collector.bootstrap()
        adv, returns = advantages(r, config.gamma, config.gae_lambda)
        data = {
            "obs": r.obs,
            "actions": r.actions,
            "logprobs": r.logprobs,
            "advantages": adv,
            "returns": returns,
            "values": r.values[:-1],
        }
        return self._optimise(data, r.counted())

    def _optimise(self, data: dict[str, torch.Tensor], keep: torch.Tensor) -> dict[str, float]:
        """Epochs of minibatches: of steps (MLP), or of whole rows replayed from their stored
        state (recurrent, CleanRL's ppo_atari_lstm)."""
        config = self.config
        recurrent = self.policy.recurrent
        flat = None if recurrent else {key: value[keep] for key, value in data.items()}
        size = self.rollout.rows if recurrent else int(keep.sum())
        if not bool(keep.any()):
            return {}
        minibatch = max(1, size // config.num_minibatches)
        totals: dict[str, list[float]] = {"policy_loss": [], "value_loss": [], "entropy": [], "approx_kl": []}
        clipped = []
        for _ in range(config.update_epochs):
            order = torch.randperm(size, device=self.device)
            for start in range(0, size, minibatch):
                chosen = order[start : start + minibatch]
                mb = self._row_minibatch(data, keep, chosen) if recurrent else self._step_minibatch(flat, chosen)
                if mb is None:
                    continue
                losses, clip_fraction = self._minibatch(*mb)
                for key, value in losses.items():
                    totals[key].append(value)
                clipped.append(clip_fraction)
                if self.stop:
                    break
            if self.stop or (config.target_kl is not None and totals["approx_kl"][-1] > config.target_kl):
                break
        values, returns = data["values"][keep].cpu().numpy(), data["returns"][keep].cpu().numpy()
        variance = np.var(returns)
        explained = float("nan") if variance == 0 else float(1 - np.var(returns - values) / variance)
        stats = {key: float(np.mean(items)) for key, items in totals.items()}
        return {**stats, "clip_fraction": float(np.mean(clipped)), "explained_variance": explained}

    def _step_minibatch(self, flat: dict[str, torch.Tensor], chosen: torch.Tensor) -> tuple:
        mb = {key: value[chosen] for key, value in flat.items()}
        distribution, value = self.policy(mb["obs"])
        return mb, distribution, value

    def _row_minibatch(self, data: dict[str, torch.Tensor], keep: torch.Tensor, rows: torch.Tensor) -> tuple | None:
        """Rows ``rows`` replayed over their steps from their stored first state and reset flags."""
        r = self.rollout
        steps = int(r.lengths[rows].max())
        if steps == 0:
            return None
        mask = keep[:steps, rows]
        if not bool(mask.any()):
            return None
        hidden = self.policy.unroll(r.obs[:steps, rows], r.states[0, rows], r.resets[:steps, rows])
        distribution, value = self.policy.heads(hidden[mask])
        mb = {key: tensor[:steps, rows][mask] for key, tensor in data.items() if key != "obs"}
        return mb, distribution, value

    def _minibatch(
        self, mb: dict[str, torch.Tensor], distribution: ActionDistribution, value: torch.Tensor
    ) -> tuple[dict[str, float], float]:
        config = self.config
        logratio = distribution.log_prob(mb["actions"]) - mb["logprobs"]
        ratio = logratio.exp()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - logratio).mean().item()
            clip_fraction = ((ratio - 1.0).abs() > config.clip_coef).float().mean().item()
        adv = mb["advantages"]
        if config.norm_adv and len(adv) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef)).mean()
        if config.clip_vloss:
            clipped = mb["values"] + (value - mb["values"]).clamp(-config.clip_coef, config.clip_coef)
            value_loss = 0.5 * torch.max((value - mb["returns"]) ** 2, (clipped - mb["returns"]) ** 2).mean()
        else:
            value_loss = 0.5 * ((value - mb["returns"]) ** 2).mean()
        entropy = distribution.entropy().mean()
        loss = policy_loss - config.ent_coef * entropy + config.vf_coef * value_loss
        losses = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item()}
        self._require_finite(losses)
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), config.max_grad_norm)
        self._require_finite({"gradient norm": grad_norm.item()})
        self.optimizer.step()
        return {**losses, "approx_kl": approx_kl}, clip_fraction

    def _require_finite(self, values: dict[str, float]) -> None:
        """Stop at the first NaN or infinity, before it reaches the weights or a checkpoint."""
        bad = [f"{name} {value}" for name, value in values.items() if not np.isfinite(value)]
        if bad:
            raise TrainingDiverged(f"training diverged at step {self.step:,}: the {', '.join(bad)}", self.step)

    def check_weights(self) -> None:
        """TrainingDiverged when a weight of the policy is NaN or infinite."""
        for name, parameter in self.policy.named_parameters():
            if not bool(torch.isfinite(parameter).all()):
                message = f"training diverged at step {self.step:,}: weight {name} is not finite"
                raise TrainingDiverged(message, self.step)


# --------------------------------------------------------------------------- the entry point


def _resume_config(saved: checkpoints.Checkpoint, env: Any, settings: dict[str, Any], source: str) -> PPOConfig:
    if env is not None and env_name(env) != saved.env:
        raise APIUsageError(
            f"the run to resume was trained on {saved.env}, not {env_name(env)}; drop the env or pick its run"
        )
    config = saved.settings(source).replace(**settings)
    if config.steps <= saved.step and "steps" not in settings:
        raise APIUsageError(
            f"the run already has {saved.step:,} of its {config.steps:,} steps; give a larger total with steps=…"
        )
    return config


def _prepare_out(out: Any) -> Path | None:
    if out is None:
        return None
    directory = Path(out)
    if directory.exists() and not directory.is_dir():
        raise APIUsageError(f"{directory} is a file; give a directory for the run's files")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _check_fresh(directory: Path | None) -> None:
    """A new run never replaces another run's checkpoint (checked with the directory locked)."""
    if directory is not None and (directory / checkpoints.FILENAME).exists():
        raise APIUsageError(
            f"{directory} already holds a run (policy.pt); resume it or choose another output directory"
        )


def _check_rollout_fits(config: PPOConfig, rows: int, observation_bytes: int) -> None:
    """Refuse a rollout buffer larger than this machine's memory before allocating it (and,
    with a lower bound on the observation, before building the envs)."""
    state_bytes = 2 * config.hidden_size * 4 if config.policy == "lstm" else 0  # (h, c) as float32
    row_bytes = observation_bytes + 64 + state_bytes  # + actions, values, flags
    needed = config.rollout_steps * rows * row_bytes
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if needed > memory:
        raise APIUsageError(
            f"the rollout needs {needed / 2**30:,.1f} GiB ({config.rollout_steps:,} steps × {rows:,} rows × "
            f"{row_bytes:,} bytes) and this machine has {memory / 2**30:,.1f} GiB; lower rollout_steps "
            "or num_envs"
        )


def ppo(
    env: Any = None,
    steps: int | None = None,
    *,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    env_kwargs: dict[str, Any] | None = None,
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
        resume: a run's directory to continue: its env, env kwargs and settings, with
            ``env_kwargs`` and ``settings`` on top; ``out`` defaults to it.
        env_kwargs: the env's creator kwargs (on top of its plugin's ``train_kwargs``).
        on_update: called after every update with the curve's new row (an exception it
            raises ends the run, saving nothing).
        on_episode: called with the step and the info of every finished episode.
        wandb: a W&B project name, or ``Wandb(project, entity=…, group=…)``: the run's
            scalars and settings go there too (``pip install 'puffer-core[wandb]'``).
        **settings: ``PPOConfig`` fields (``num_envs``, ``backend``, ``batch_size``, ``policy``, ``seed``, …),
            on top of the env's ``train_defaults`` (its plugin's ``EnvSpec``).

    Returns:
        The ``Curve``: one row per update and every finished episode.

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
    saved = checkpoints.load(resume) if resume is not None else None
    config, env, env_kwargs = _run_settings(env, env_kwargs, settings, saved, resume)
    if saved is not None and out is None:
        out = resume
    config.validate()
    _check_rollout_fits(config, config.num_envs, 0)  # at least one row per env, whatever it observes
    env_kwargs = dict(env_kwargs or {})
    device = pick_device(config.device)
    wandb = Wandb.of(wandb)
    if out is not None:
        require_matplotlib()
    require_logs(out is not None, wandb)
    directory = _prepare_out(out)
    with contextlib.ExitStack() as held:
        if directory is not None:
            held.enter_context(RunLock(directory))
            if saved is None or Path(out).resolve() != Path(resume).resolve():
                _check_fresh(directory)
        try:
            reports = (on_update, on_episode, wandb)
            trainer, stop = _train(env, env_kwargs, config, device, saved, directory, reports)
        except TrainingDiverged as exc:
            raise TrainingDiverged(f"{exc}{_diverged_advice(directory)}", exc.step) from None
    if stop:
        where = f"; checkpoint in {directory} (continue with `puffer train --resume {directory}`)" if directory else ""
        name = signal.Signals(stop.signal_number).name
        raise TrainingInterrupted(
            f"training stopped by {name} at step {trainer.step:,}{where}", trainer.curve, stop.signal_number
        )
    return trainer.curve


def _run_settings(
    env: Any, env_kwargs: dict[str, Any] | None, settings: dict[str, Any], saved: Any, resume: Any
) -> tuple[PPOConfig, Any, dict[str, Any] | None]:
    """(settings, env, env kwargs) of a run: a resumed run's own under the caller's, or the env
    family's training defaults under the caller's."""
    if saved is not None:
        config = _resume_config(saved, env, settings, str(resume))
        return config, saved.env if env is None else env, {**saved.env_kwargs, **(env_kwargs or {})}
    if env is None:
        raise APIUsageError("give an env id (e.g. classic/cartpole) or resume=DIR")
    defaults = train_defaults(env)
    return defaults.config(settings), env, defaults.kwargs(env_kwargs)


def _diverged_advice(directory: Path | None) -> str:
    kept = ""
    if directory is not None and (directory / checkpoints.FILENAME).exists():
        kept = f"; {directory / checkpoints.FILENAME} keeps the last finite checkpoint"
    return f"{kept}; lower learning_rate or max_grad_norm, or check the env's rewards for NaN and inf"


def _train(
    env: Any,
    env_kwargs: dict[str, Any],
    config: PPOConfig,
    device: torch.device,
    saved: checkpoints.Checkpoint | None,
    directory: Path | None,
    reports: tuple[UpdateReport | None, EpisodeReport | None, Wandb | None],
) -> tuple[Trainer, _StopRequests]:
    """Build the envs and the trainer, train, and save at the end or on a stop request (never
    after an exception: a crash or a divergence leaves the last good checkpoint in place).
    The logs are written whatever happens."""
    on_update, on_episode, wandb = reports
    torch.manual_seed(config.seed)
    stop = _StopRequests()
    envs = vector.make(
        env,
        num_envs=config.num_envs,
        num_workers=config.num_workers,
        batch_size=config.batch_size,
        backend=config.backend,
        autoreset=config.autoreset,
        seed=config.seed,
        on_fault=config.on_fault,
        **env_kwargs,
    )
    with envs, stop.installed():
        trainer = Trainer(envs, config, device, stop)
        threads = config.torch_threads or (available_cpus() if trainer.policy.encoder.has_image else 1)
        torch.set_num_threads(threads)
        if saved is not None:
            _check_spaces(saved, envs)
            trainer.restore(saved)
        title = f"{env_name(env)}: PPO, seed {config.seed}"
        settings = {"env": env_name(env), **config.to_dict(), **{f"env_kwargs.{k}": v for k, v in env_kwargs.items()}}
        with contextlib.closing(open_logs(directory, wandb, settings, trainer.step)) as logs:
            trainer.on_episode = chain(logs.episode, on_episode)

            def save() -> None:
                logs.flush()
                if directory is not None:
                    checkpoints.save(directory, trainer.checkpoint(env, env_kwargs))
                    trainer.curve.write(directory, title)

            trainer.train(chain(logs.update, on_update), save)
            save()
    return trainer, stop


def _check_spaces(saved: checkpoints.Checkpoint, envs: vector.VectorEnv) -> None:
    now = spaces_of(envs)
    for key in ("observation", "action"):
        if saved.spaces.get(key) != now[key]:
            raise APIUsageError(
                f"the run to resume was trained with flat {key} space {saved.spaces.get(key)}, but {saved.env} now "
                f"gives {now[key]}; its policy does not fit (did the env's version or kwargs change?)"
            )
