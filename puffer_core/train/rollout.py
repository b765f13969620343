"""One rollout of a vector env, and its advantages: which steps count, and GAE over them.

Rows are agent rows of the vector env. Step ``t`` of a row holds the observation the policy
saw, the action it took, and what ``step`` returned for it (reward, terminal, truncation).
A step counts (``valid``) when its observation belongs to a live agent (the vector env's
mask) and the row did not end on the step before: with next-step autoreset that step only
resets the env and ignores the action, so it is no transition at all. Rows of dead agents
(zeroed, masked) never count.

Bootstrapping follows from next-step autoreset too: the observation after a truncation is
the episode's last one, so ``V(obs[t + 1])`` is exactly what a truncated step needs; after
a termination nothing is bootstrapped; and the GAE chain breaks at every end.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["Rollout", "advantages"]


class Rollout:
    """Preallocated tensors for ``steps`` vector steps of ``rows`` agent rows."""

    def __init__(
        self,
        steps: int,
        rows: int,
        obs_shape: tuple,
        obs_dtype: np.dtype,
        action_shape: tuple,
        action_dtype: torch.dtype,
        device: torch.device,
    ):
        self.steps, self.rows = steps, rows
        obs_torch = torch.from_numpy(np.zeros(1, obs_dtype)).dtype

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(steps, rows, *shape, dtype=dtype, device=device)

        self.obs = zeros(*obs_shape, dtype=obs_torch)
        self.actions = zeros(*action_shape, dtype=action_dtype)
        self.logprobs = zeros()
        self.values = zeros()
        self.rewards = zeros()
        self.terminals = zeros(dtype=torch.bool)
        self.ended = zeros(dtype=torch.bool)  # terminal or truncated
        self.valid = zeros(dtype=torch.bool)


def advantages(
    rollout: Rollout, next_value: torch.Tensor, gamma: float, gae_lambda: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns) by GAE; entries of steps that do not count are meaningless."""
    values, rewards = rollout.values, rollout.rewards
    keep = (~rollout.terminals).float()  # bootstrap unless the agent's episode terminated
    chain = (~rollout.ended).float()  # carry the GAE sum back unless the episode ended here
    out = torch.zeros_like(values)
    running = torch.zeros_like(next_value)
    for t in reversed(range(rollout.steps)):
        following = next_value if t == rollout.steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * following * keep[t] - values[t]
        running = delta + gamma * gae_lambda * chain[t] * running
        out[t] = running
    return out, out + values
