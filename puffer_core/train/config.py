"""PPO's settings: one dataclass, validated with errors that say what works.

The defaults are CleanRL's ppo.py but for a larger batch of shorter rollouts and a larger
learning rate (32 envs × 32 steps, 3e-3), which solve classic control and the probes in a
fraction of the wall-clock time. For Atari, CleanRL's ppo_atari settings are the ones to
use: ``--set num_envs=8 --set rollout_steps=128 --set learning_rate=2.5e-4``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from puffer_core.errors import APIUsageError

__all__ = ["PPOConfig"]


@dataclass
class PPOConfig:
    """Everything a PPO run is made of except the env; ``puffer train --set KEY=VALUE`` sets any field."""

    steps: int = 200_000  # environment steps (agent rows × vector steps) in the whole run
    num_envs: int = 32
    num_workers: int | None = None
    backend: str = "serial"
    on_fault: str = "raise"  # "restart": a crashed env's worker is replaced and training goes on
    seed: int = 0
    device: str | None = None  # None: cuda when available, else cpu
    rollout_steps: int = 32  # vector steps per rollout (CleanRL's num_steps)
    learning_rate: float = 3e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    hidden_size: int = 64
    # None: one thread for MLP policies (they run fastest so, and the other cores step envs),
    # every core for CNN policies (convolutions gain ~1.5× from a second core here).
    torch_threads: int | None = None
    checkpoint_seconds: float = 30.0  # how often policy.pt is refreshed during a run

    def validate(self) -> PPOConfig:
        positive = ("steps", "num_envs", "rollout_steps", "num_minibatches", "update_epochs", "hidden_size")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise APIUsageError(f"{name} must be a positive int, got {value!r}")
        if self.steps > 10**12:
            raise APIUsageError(f"steps {self.steps:,} is absurd; give at most 10**12")
        for name in ("learning_rate", "max_grad_norm", "clip_coef"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise APIUsageError(f"{name} must be a positive number, got {value!r}")
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise APIUsageError(f"{name} must be in [0, 1], got {value!r}")
        if self.torch_threads is not None and (not isinstance(self.torch_threads, int) or self.torch_threads < 1):
            raise APIUsageError(f"torch_threads must be None or an int ≥ 1, got {self.torch_threads!r}")
        return self

    def replace(self, **changes: Any) -> PPOConfig:
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise APIUsageError(f"unknown PPO setting {unknown[0]!r}; the settings are: {', '.join(names)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
