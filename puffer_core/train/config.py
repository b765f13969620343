"""PPO's settings: one dataclass, validated with errors that say what works.

The defaults are CleanRL's ppo.py but for a larger batch of shorter rollouts and a larger
learning rate (32 envs × 32 steps, 3e-3), which solve classic control and the probes in a
fraction of the wall-clock time. For Atari, CleanRL's ppo_atari settings are the ones to
use: ``--set num_envs=8 --set rollout_steps=128 --set learning_rate=2.5e-4``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import (
    MAX_ENVS,
    MAX_SECONDS,
    MAX_SEED,
    MAX_STEPS,
    MAX_WORKERS,
    PLACEMENTS,
    check_int,
    check_number,
)
from puffer_core.specs.suggest import did_you_mean

__all__ = ["PPOConfig"]


@dataclass
class PPOConfig:
    """Everything a PPO run is made of except the env; ``puffer train --set KEY=VALUE`` sets any field."""

    steps: int = 200_000
    """Environment steps (agent rows × vector steps) in the whole run."""
    num_envs: int = 32
    """Envs stepped at once (agent slots for a multi-agent env)."""
    num_workers: int | None = None
    """Worker processes of the multiprocessing or Ray backend (None: one per core, at most num_envs)."""
    batch_size: int | None = None
    """Envs per recv, vector.make's batch_size (None: num_envs, full batches)."""
    backend: str = "serial"
    """Vector backend: serial, multiprocessing or ray."""
    ray_address: str | None = None
    """Ray only: the cluster the env workers run on (auto, HOST:PORT, ray://HOST:PORT; None:
    RAY_ADDRESS, else a Ray of our own here); where a run ran, not inherited when it resumes."""
    placement: str | None = None
    """Ray only: spread the workers over as many nodes as it can, or pack them on as few
    (None: Ray's own scheduling)."""
    native: bool = False
    """Step the envs in their plugin's native batches (one object stepping many envs, such as
    ALE's vector env for atari/*; ``puffer envs --json`` says which envs have them) instead of
    one env at a time; needs autoreset next_step."""
    autoreset: str = "next_step"
    """The vector env's autoreset mode: next_step or same_step (both train the same)."""
    on_fault: str = "raise"
    """raise, or restart: a crashed env's worker is replaced and training goes on."""
    seed: int = 0
    """Seed of the envs and the policy."""
    device: str | None = None
    """Where the policy runs: cpu, cuda or cuda:N (None: cuda when available, else cpu)."""
    rollout_steps: int = 32
    """Vector steps per rollout (CleanRL's num_steps)."""
    learning_rate: float = 3e-3
    """Adam's step size."""
    anneal_lr: bool = True
    """Lower the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """Discount of future rewards."""
    gae_lambda: float = 0.95
    """λ of generalized advantage estimation."""
    num_minibatches: int = 4
    """Minibatches each rollout is split into per epoch."""
    update_epochs: int = 4
    """Passes over each rollout."""
    norm_adv: bool = True
    """Normalize the advantages of each minibatch."""
    clip_coef: float = 0.2
    """PPO's clip of the policy ratio."""
    clip_vloss: bool = True
    """Clip the value loss as the policy ratio is clipped."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """The gradient's norm is clipped to this."""
    target_kl: float | None = None
    """Stop an update's epochs early past this approximate KL divergence (None: never)."""
    policy: str = "mlp"
    """mlp, or lstm: an LSTM of hidden_size units after the observation encoder."""
    hidden_size: int = 64
    """Units of the policy's hidden layers."""
    # None: one thread for MLP policies (their small matrices gain nothing from more, and the
    # other cores step envs), every core for CNN policies (convolutions split well over cores).
    torch_threads: int | None = None
    """Threads of the learner's torch (None: one for MLP policies, every core for CNN policies)."""
    checkpoint_seconds: float = 30.0
    """How often policy.pt is refreshed during a run."""
    eval_seconds: float | None = None
    """Every this many seconds, play eval_episodes of the policy on an env of its own and keep best.pt, the
    checkpoint of the best mean return so far, beside policy.pt (None: no evaluation during training)."""
    eval_episodes: int = 5
    """Episodes each evaluation during training plays (with eval_seconds)."""
    log_seconds: float = 30.0
    """Without a terminal (a detached run's train.log, a pipe), a progress line at the first update and then every
    this many seconds."""
    reward_scale: float = 1.0
    """Rewards as the learner sees them are multiplied by this (episode returns in the curve stay the env's own)."""
    reward_clip: float | None = None
    """Rewards as the learner sees them are then clipped to ±this (None: not clipped)."""
    # the learning rate then anneals over whichever of steps and max_seconds runs out first
    max_seconds: float | None = None
    """Stop after this many seconds of training (None: run all the steps)."""

    def validate(self) -> PPOConfig:
        """Check every setting's type and range; the first bad one is a one-line APIUsageError."""
        for name, check in _CHECKS.items():
            value = getattr(self, name)
            if value is None and name in _OPTIONAL:
                continue
            check(name, value)
        for name in RAY_ONLY:
            if getattr(self, name) is not None and self.backend != "ray":
                raise APIUsageError(
                    f"{name} is for the Ray backend: it needs backend='ray' (--backend ray), not {self.backend!r}"
                )
        if self.batch_size is not None and self.batch_size > self.num_envs:
            raise APIUsageError(
                f"batch_size {self.batch_size} is more than num_envs {self.num_envs}; use a batch_size ≤ "
                f"{self.num_envs} (envs per batch, like num_envs counts envs) or leave it unset for full batches"
            )
        return self

    @classmethod
    def from_saved(cls, saved: Any, source: str) -> PPOConfig:
        """The settings a checkpoint holds, validated; ``source`` names the file in errors."""
        if not isinstance(saved, dict):
            raise APIUsageError(f"{source}: its settings are a {type(saved).__name__}, not a dict of PPO settings")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(key) for key in saved if key not in names)
        if unknown:
            raise APIUsageError(
                f"{source}: unknown PPO setting(s) {', '.join(map(repr, unknown))} in the checkpoint "
                "(written by another version of puffer-core?); retrain with this version"
            )
        try:
            return cls(**saved).validate()
        except APIUsageError as exc:
            raise APIUsageError(f"{source}: the saved settings are not valid: {exc}") from None

    def replace(self, **changes: Any) -> PPOConfig:
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            name = unknown[0]
            raise APIUsageError(
                f"unknown PPO setting {name!r}{did_you_mean(name, names, SETTING_ALIASES)}; "
                f"the settings are: {', '.join(names)}"
            )
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: Other libraries' names of PPO's settings (Stable-Baselines3, CleanRL, PufferLib), for did-you-mean.
SETTING_ALIASES = {
    "lr": "learning_rate",
    "total_timesteps": "steps",
    "timesteps": "steps",
    "n_envs": "num_envs",
    "n_steps": "rollout_steps",
    "num_steps": "rollout_steps",
    "bptt_horizon": "rollout_steps",
    "horizon": "rollout_steps",
    "minibatch_size": "num_minibatches",
    "n_minibatches": "num_minibatches",
    "n_epochs": "update_epochs",
    "epochs": "update_epochs",
    "clip_range": "clip_coef",
    "clip_range_vf": "clip_vloss",
    "clip_param": "clip_coef",
    "entropy_coef": "ent_coef",
    "entropy_coefficient": "ent_coef",
    "value_coef": "vf_coef",
    "value_loss_coef": "vf_coef",
    "normalize_advantage": "norm_adv",
    "discount": "gamma",
    "lambda": "gae_lambda",
    "gae": "gae_lambda",
    "hidden": "hidden_size",
    "net_arch": "hidden_size",
    "threads": "torch_threads",
    "timeout": "max_seconds",
}
#: The widest hidden layer: 16k units are already a 1 GB weight matrix per layer.
MAX_HIDDEN = 16_384
BACKENDS = ("serial", "multiprocessing", "mp", "ray")
ON_FAULT = ("raise", "restart")
POLICIES = ("mlp", "lstm")
#: Settings that say where the Ray backend's workers run: valid with backend="ray" only,
#: and not carried over when a run is resumed (it may resume elsewhere).
RAY_ONLY = ("ray_address", "placement")
#: the vector env's autoreset modes the trainer handles ("disabled" would leave ended envs unreset)
AUTORESET = ("next_step", "same_step")


def _int(low: int, high: int) -> Callable[[str, Any], Any]:
    return lambda name, value: check_int(name, value, low, high)


def _number(low: float, high: float, low_open: bool = False) -> Callable[[str, Any], Any]:
    return lambda name, value: check_number(name, value, low, high, low_open=low_open)


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise APIUsageError(f"{name} must be true or false, got {value!r}")


def _one_of(choices: tuple[str, ...]) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise APIUsageError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")

    return check


#: What a Ray address looks like: "auto", or a head's HOST:PORT, with ray:// for Ray Client.
_RAY_ADDRESS = re.compile(r"auto|(ray://)?[\w.\-\[\]:]+:\d{1,5}")


def _address(name: str, value: Any) -> None:
    if not isinstance(value, str) or not _RAY_ADDRESS.fullmatch(value):
        raise APIUsageError(f"{name} must be 'auto', 'HOST:PORT' or 'ray://HOST:PORT', got {value!r}")


def _device(name: str, value: Any) -> None:
    if not isinstance(value, str) or not re.fullmatch(r"(cpu|cuda|mps|xpu)(:\d+)?", value):
        raise APIUsageError(f"{name} must be 'cpu', 'cuda' or 'cuda:N', got {value!r}")


#: Settings that may be None (each meaning a default chosen at run time).
_OPTIONAL = {
    "num_workers",
    "batch_size",
    "ray_address",
    "placement",
    "device",
    "target_kl",
    "torch_threads",
    "reward_clip",
    "max_seconds",
    "eval_seconds",
}
#: One check per PPOConfig field (a test fails when a field has none).
_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "steps": _int(1, MAX_STEPS),
    "num_envs": _int(1, MAX_ENVS),
    "num_workers": _int(1, MAX_WORKERS),
    "batch_size": _int(1, MAX_ENVS),
    "backend": _one_of(BACKENDS),
    "ray_address": _address,
    "placement": _one_of(PLACEMENTS),
    "native": _flag,
    "autoreset": _one_of(AUTORESET),
    "on_fault": _one_of(ON_FAULT),
    "seed": _int(0, MAX_SEED),
    "device": _device,
    "rollout_steps": _int(1, 1_000_000),
    "learning_rate": _number(0, 10, low_open=True),
    "anneal_lr": _flag,
    "gamma": _number(0, 1),
    "gae_lambda": _number(0, 1),
    "num_minibatches": _int(1, 1_000_000),
    "update_epochs": _int(1, 10_000),
    "norm_adv": _flag,
    "clip_coef": _number(0, 100, low_open=True),
    "clip_vloss": _flag,
    "ent_coef": _number(0, 100),
    "vf_coef": _number(0, 100),
    "max_grad_norm": _number(0, 1e6, low_open=True),
    "target_kl": _number(0, 100, low_open=True),
    "policy": _one_of(POLICIES),
    "hidden_size": _int(1, MAX_HIDDEN),
    "torch_threads": _int(1, 1_024),
    "checkpoint_seconds": _number(0, MAX_SECONDS),
    "log_seconds": _number(0, MAX_SECONDS),
    "eval_seconds": _number(0, MAX_SECONDS, low_open=True),
    "eval_episodes": _int(1, 10_000),
    "reward_scale": _number(0, 1e6, low_open=True),
    "reward_clip": _number(0, 1e9, low_open=True),
    "max_seconds": _number(0, MAX_SECONDS, low_open=True),
}
