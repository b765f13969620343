"""The PPO loop through ``puffer_core.vector``, in the CleanRL tradition: one readable ``Trainer``.

A ``Trainer`` holds one run's state: the vector env, a ``Policy`` for its flat spaces (an
MLP, or ``policy="lstm"``), an Adam optimizer, and the ``Collector`` that fills a ``Rollout``
(full or async batches, next-step or same-step autoreset, agent masks, one recurrent state
per row); it alternates rollouts and clipped-surrogate updates, keeping a ``Curve``, and
stops at the next step on Ctrl-C or SIGTERM (``TrainingInterrupted``) or at the first
non-finite loss or weight (``TrainingDiverged``). ``puffer_core.train.run.ppo`` builds and
runs one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from puffer_core import vector
from puffer_core.env.factory import env_name
from puffer_core.env.postprocess import EPISODE_LENGTH, EPISODE_RETURN
from puffer_core.errors import APIUsageError, PufferError
from puffer_core.train import checkpoint as checkpoints
from puffer_core.train.collect import Collector
from puffer_core.train.config import PPOConfig
from puffer_core.train.curve import Curve
from puffer_core.train.policy import ActionDistribution, Policy
from puffer_core.train.rollout import Rollout, advantages

__all__ = [
    "EpisodeReport",
    "Trainer",
    "TrainingDiverged",
    "TrainingInterrupted",
    "UpdateReport",
    "device_label",
    "pick_device",
]


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


def device_label(device: torch.device) -> str:
    """``cpu``, or ``cuda:0 (NVIDIA GeForce RTX 4090)``: where the policy runs, as a person reads it."""
    if device.type != "cuda":
        return str(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def spaces_of(envs: vector.VectorEnv) -> dict[str, str]:
    return {"observation": repr(envs.single_observation_space), "action": repr(envs.single_action_space)}


class StopRequests:
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
    def installed(self) -> Iterator[StopRequests]:
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

    def __init__(self, envs: vector.VectorEnv, config: PPOConfig, device: torch.device, stop: StopRequests):
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
        check_rollout_fits(config, envs.num_envs, observed.dtype.itemsize * int(np.prod(observed.shape)))
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
                if EPISODE_RETURN in ended:
                    self.curve.add_episode(self.step, float(ended[EPISODE_RETURN]), int(ended[EPISODE_LENGTH]))
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


def check_rollout_fits(config: PPOConfig, rows: int, observation_bytes: int) -> None:
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
