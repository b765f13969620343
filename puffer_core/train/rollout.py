"""One rollout of a vector env, and its advantages: which steps count, and GAE over them.

Rows are agent rows of the vector env. Each row keeps its own time index: with async
batches (``batch_size < num_envs``) rows come back at different rates, so a row holds
``lengths[row]`` complete steps when the rollout ends (every row holds ``steps`` with full
batches). Step ``t`` of a row holds the observation the policy saw, the state it acted with
(recurrent policies), the action it took and its log-probability and value, and, once the
row's next batch arrives, what the env returned for it (reward, terminal, truncation).

A step counts (``valid``) when its observation belongs to a live agent (the vector env's
mask) and, under next-step autoreset, the row did not end on the step before: that step
only resets the env and ignores the action, so it is no transition at all. Rows of dead
agents (zeroed, masked) and steps an env crashed in never count; nor do steps past a row's
length.

Bootstrapping: ``values[lengths[row], row]`` is the value after a row's last complete step:
of its step still in flight when the rollout ended (which becomes step 0 of the next
rollout, ``begin``), or of the observation its last batch brought. Under next-step
autoreset the observation after a truncation is the episode's last one, so its value is
what a truncated step needs; under same-step autoreset the collector stores the value of
the info's final observation in ``final_values``. After a termination nothing is
bootstrapped, and the GAE chain breaks at every end and at every row's last step.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["Rollout", "advantages"]


class Rollout:
    """Preallocated tensors for up to ``steps`` steps of each of ``rows`` agent rows."""

    def __init__(
        self,
        steps: int,
        rows: int,
        obs_shape: tuple,
        obs_dtype: np.dtype,
        action_shape: tuple,
        action_dtype: torch.dtype,
        device: torch.device,
        state_shape: tuple | None = None,
    ):
        self.steps, self.rows = steps, rows
        obs_torch = torch.from_numpy(np.zeros(1, obs_dtype)).dtype

        def zeros(*shape: int, dtype: torch.dtype = torch.float32, extra: int = 0) -> torch.Tensor:
            return torch.zeros(steps + extra, rows, *shape, dtype=dtype, device=device)

        self.obs = zeros(*obs_shape, dtype=obs_torch)
        self.actions = zeros(*action_shape, dtype=action_dtype)
        self.logprobs = zeros()
        self.values = zeros(extra=1)  # [steps + 1]: a row's bootstrap value sits after its last step
        self.rewards = zeros()
        self.terminals = zeros(dtype=torch.bool)
        self.ended = zeros(dtype=torch.bool)  # terminal or truncated
        self.valid = zeros(dtype=torch.bool)
        self.resets = zeros(dtype=torch.bool)  # the row's state was zeroed before this step
        self.states = None if state_shape is None else zeros(*state_shape)  # the state the step was acted with
        self.final_values = zeros()  # same-step autoreset: V(final observation) of a truncated step
        self.has_final = zeros(dtype=torch.bool)
        self.counts = torch.zeros(rows, dtype=torch.int64, device=device)  # steps acted on
        self.lengths = torch.zeros(rows, dtype=torch.int64, device=device)  # steps complete

    def _per_step(self) -> list[torch.Tensor]:
        """The tensors written when the policy acts (what a step in flight already holds)."""
        acted = [self.obs, self.actions, self.logprobs, self.values, self.valid, self.resets]
        return acted if self.states is None else [*acted, self.states]

    def begin(self) -> None:
        """Start the next rollout: a row's step still in flight becomes its step 0, as it was
        stored (observation, state, action, log-probability, value, flags); other rows start empty."""
        flight = (self.counts > self.lengths).nonzero().squeeze(1)
        if len(flight):
            at = self.lengths[flight]
            for tensor in self._per_step():
                tensor[0, flight] = tensor[at, flight]
        self.counts = (self.counts > self.lengths).long()
        self.lengths.zero_()
        self.has_final.zero_()

    def counted(self) -> torch.Tensor:
        """``[steps, rows]``: the steps that count (valid, within the row's length)."""
        inside = torch.arange(self.steps, device=self.lengths.device)[:, None] < self.lengths[None]
        return self.valid & inside

    @property
    def complete(self) -> int:
        return int(self.lengths.sum())


def advantages(rollout: Rollout, gamma: float, gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns) by GAE, ``[steps, rows]``; entries of steps that do not count are meaningless."""
    r = rollout
    values = r.values[:-1]
    following = torch.where(r.has_final, r.final_values, r.values[1:])
    keep = (~r.terminals).float()  # bootstrap unless the agent's episode terminated
    inside = torch.arange(1, r.steps + 1, device=values.device)[:, None] < r.lengths[None]
    chain = ~r.ended & inside  # carry the GAE sum back unless the episode ended here or the row's steps do
    out = torch.zeros_like(values)
    running = torch.zeros_like(values[0])
    for t in reversed(range(r.steps)):
        delta = r.rewards[t] + gamma * following[t] * keep[t] - values[t]
        running = delta + torch.where(chain[t], gamma * gae_lambda * running, 0.0)
        out[t] = running
    return out, out + values
