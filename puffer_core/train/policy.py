"""The actor-critic network: reads flat observations, acts in the flat action space.

Observations arrive as the emulator lays them out (one flat buffer per row); the ``Encoder``
(:mod:`puffer_core.train.encoder`) turns each leaf into features: one-hots, embeddings of
category ids (with a small CNN over grids of them), a Nature CNN for pictures, numbers.
Actions: a categorical per Discrete / MultiDiscrete dimension, a diagonal Gaussian with a
learned, state-independent log-std for Box actions (CleanRL's ppo_continuous_action).
``Policy(..., kind="lstm")`` reads the heads from an LSTM after the encoder (see
:mod:`puffer_core.train.recurrent`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.distributions import Categorical, Normal

from puffer_core.errors import APIUsageError, SpaceError
from puffer_core.train.encoder import Encoder, layer as _layer
from puffer_core.train.recurrent import Memory

__all__ = ["ActionDistribution", "Encoder", "Policy"]

# torch.distributions checks every argument of every distribution it builds; the policy
# builds one per forward pass from its own finite outputs, so the checks only cost time
# (a third of a CartPole training step).
torch.distributions.Distribution.set_default_validate_args(False)


class ActionDistribution:
    """Categoricals (one per discrete dimension) or a diagonal Gaussian, batched over rows."""

    def __init__(self, kind: str, params: torch.Tensor, nvec: list[int], log_std: torch.Tensor | None = None):
        self.kind = kind
        if kind == "box":
            self.normal = Normal(params, log_std.expand_as(params).exp())
        else:
            self.categoricals = [Categorical(logits=logits) for logits in torch.split(params, nvec, dim=1)]

    def sample(self) -> torch.Tensor:
        if self.kind == "box":
            return self.normal.sample()
        actions = torch.stack([c.sample() for c in self.categoricals], dim=1)
        return actions[:, 0] if self.kind == "discrete" else actions

    def mode(self) -> torch.Tensor:
        if self.kind == "box":
            return self.normal.mean
        actions = torch.stack([c.probs.argmax(dim=1) for c in self.categoricals], dim=1)
        return actions[:, 0] if self.kind == "discrete" else actions

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        if self.kind == "box":
            return self.normal.log_prob(actions).sum(dim=1)
        columns = actions.long().reshape(actions.shape[0], -1)
        return sum(c.log_prob(columns[:, i]) for i, c in enumerate(self.categoricals))

    def entropy(self) -> torch.Tensor:
        if self.kind == "box":
            return self.normal.entropy().sum(dim=1)
        return sum(c.entropy() for c in self.categoricals)


def _action_head(action_space: spaces.Space) -> tuple[str, list[int], int]:
    """(kind, category counts, output size) for a flat action space."""
    if isinstance(action_space, spaces.Discrete):
        return "discrete", [int(action_space.n)], int(action_space.n)
    if isinstance(action_space, spaces.MultiDiscrete):
        nvec = [int(n) for n in action_space.nvec.reshape(-1)]
        return "multidiscrete", nvec, sum(nvec)
    if isinstance(action_space, spaces.MultiBinary):
        n = int(np.prod(action_space.shape))
        return "multidiscrete", [2] * n, 2 * n
    if isinstance(action_space, spaces.Box) and len(action_space.shape) == 1:
        return "box", [], int(action_space.shape[0])
    raise SpaceError(
        f"the trainer cannot act in {action_space}; it takes Discrete, MultiDiscrete, MultiBinary or a 1-D Box "
        "(what puffer_core's emulation makes of any action tree)"
    )


class Policy(nn.Module):
    """Actor and critic over an ``Encoder``: two tanh MLPs (CleanRL's), or one ReLU trunk
    after a CNN for pictures (CleanRL's Atari agent); ``kind="lstm"`` puts an LSTM of
    ``hidden_size`` units (``puffer_core.train.recurrent.Memory``) after the encoder (and the
    trunk) and reads both heads from its output (CleanRL's ppo_atari_lstm).

    A recurrent policy carries a state per row: ``act(flat, state)`` returns the next one,
    ``initial_state(rows)`` is the zero state (None for ``"mlp"``); ``forward(flat)`` acts
    from the zero state, as on an episode's first step.
    """

    def __init__(self, layout: Any, action_space: spaces.Space, hidden_size: int = 64, kind: str = "mlp"):
        super().__init__()
        if kind not in ("mlp", "lstm"):
            raise APIUsageError(f"policy must be 'mlp' or 'lstm', got {kind!r}")
        self.kind = kind
        self.encoder = Encoder(layout)
        self.action_kind, self.nvec, outputs = _action_head(action_space)
        features = self.encoder.size
        self.memory: Memory | None = None
        if self.encoder.has_image:
            self.trunk = nn.Sequential(_layer(nn.Linear(features, 512)), nn.ReLU())
            self.actor_body, self.critic_body, width = nn.Identity(), nn.Identity(), 512
        else:
            self.trunk = nn.Identity()
            self.actor_body = self._mlp(features, hidden_size) if kind == "mlp" else nn.Identity()
            self.critic_body = self._mlp(features, hidden_size) if kind == "mlp" else nn.Identity()
            width = hidden_size if kind == "mlp" else features
        if kind == "lstm":
            self.memory = Memory(width, hidden_size)
            width = hidden_size
        self.actor = _layer(nn.Linear(width, outputs), std=0.01)
        self.critic = _layer(nn.Linear(width, 1), std=1.0)
        self.log_std = nn.Parameter(torch.zeros(1, outputs)) if self.action_kind == "box" else None

    @staticmethod
    def _mlp(inputs: int, hidden: int) -> nn.Module:
        return nn.Sequential(_layer(nn.Linear(inputs, hidden)), nn.Tanh(), _layer(nn.Linear(hidden, hidden)), nn.Tanh())

    @property
    def recurrent(self) -> bool:
        return self.memory is not None

    def initial_state(self, rows: int, device: torch.device | str | None = None) -> torch.Tensor | None:
        """The zero state of ``rows`` rows, ``[rows, 2, hidden_size]`` (None for an MLP policy)."""
        if self.memory is None:
            return None
        return self.memory.initial_state(rows, device if device is not None else self.critic.weight.device)

    def _features(self, flat: torch.Tensor, state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden = self.trunk(self.encoder(flat))
        if self.memory is None:
            return hidden, None
        if state is None:
            state = self.initial_state(len(flat), flat.device)
        return self.memory.step(hidden, state)

    def heads(self, hidden: torch.Tensor) -> tuple[ActionDistribution, torch.Tensor]:
        """(action distribution, value) from the features the heads read."""
        params = self.actor(self.actor_body(hidden))
        value = self.critic(self.critic_body(hidden)).squeeze(1)
        return ActionDistribution(self.action_kind, params, self.nvec, self.log_std), value

    def act(
        self, flat: torch.Tensor, state: torch.Tensor | None = None
    ) -> tuple[ActionDistribution, torch.Tensor, torch.Tensor | None]:
        """(action distribution, value, next state) for flat observation rows and their state
        (None: the zero state; ignored by an MLP policy, whose next state is None)."""
        hidden, state = self._features(flat, state)
        distribution, value = self.heads(hidden)
        return distribution, value, state

    def value(self, flat: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        hidden, _ = self._features(flat, state)
        return self.critic(self.critic_body(hidden)).squeeze(1)

    def unroll(self, obs: torch.Tensor, state: torch.Tensor, resets: torch.Tensor) -> torch.Tensor:
        """The heads' features ``[steps, rows, hidden]`` of a recurrent policy over ``obs [steps,
        rows, ...]`` from ``state``, zeroing a row's state where ``resets [steps, rows]`` is True."""
        steps, rows = obs.shape[:2]
        features = self.trunk(self.encoder(obs.reshape(steps * rows, *obs.shape[2:])))
        return self.memory.unroll(features.reshape(steps, rows, -1), state, resets)

    def forward(self, flat: torch.Tensor) -> tuple[ActionDistribution, torch.Tensor]:
        """(action distribution, value) for a batch of flat observation rows (a recurrent
        policy: from the zero state, as on an episode's first step)."""
        distribution, value, _ = self.act(flat)
        return distribution, value
