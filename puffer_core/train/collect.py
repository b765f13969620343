"""Filling a ``Rollout`` from a vector env, full batches or async ones, with the policy's state per row.

Each ``recv`` returns some rows (``env_ids``; all of them with full batches). For each row
the batch brings the results of the step it had in flight (``record``), then the policy acts
on the observation it brings (``act``), with the row's recurrent state, zeroed first where
``step_flags`` says the observation starts afresh.

A rollout ends with the first batch that completes a row's ``steps``-th step. That batch
stays pending: its results belong to the rollout that ends, its observations start the next
one (acted on by the updated policy), and its rows bootstrap from their value under the
policy that collected them (``bootstrap``). A row whose step is still in flight when the
rollout ends bootstraps from that step's value, and the step becomes its step 0 of the next
rollout (``Rollout.begin``). With full batches every row holds exactly ``steps`` steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from puffer_core.train.policy import Policy
from puffer_core.train.recurrent import step_flags, zero_where
from puffer_core.train.rollout import Rollout

__all__ = ["Batch", "Collector"]

#: what ``VectorEnv.recv`` returns: (obs, rewards, terminals, truncations, infos, env_ids, masks)
Batch = tuple


class Collector:
    """Steps ``envs`` with ``policy`` into ``rollout``; keeps each row's state and flags across rollouts."""

    def __init__(
        self,
        envs: Any,
        policy: Policy,
        rollout: Rollout,
        autoreset: str,
        device: torch.device,
        to_env_actions: Callable[[torch.Tensor], np.ndarray],
        learner_rewards: Callable[[torch.Tensor], torch.Tensor] = lambda rewards: rewards,
    ):
        self.envs, self.policy, self.rollout, self.device = envs, policy, rollout, device
        self.autoreset = autoreset
        self.to_env_actions = to_env_actions
        self.learner_rewards = learner_rewards  # what the learner sees of the env's rewards (scaled, clipped)
        rows = envs.num_envs
        self.all_rows = torch.arange(rows, device=device)
        self.prev_ended = torch.zeros(rows, dtype=torch.bool, device=device)
        self.prev_valid = torch.zeros(rows, dtype=torch.bool, device=device)  # False: no step before
        self.state = policy.initial_state(rows, device)  # each row's state after its last step
        self.pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # (rows, obs, masks)
        self.full = False  # the last recorded batch completed a row's last step

    # ---------------------------------------------------------------- one batch
    def start(self, seed: int) -> None:
        """Reset the envs; their first batch is pending."""
        self.envs.async_reset(seed)
        self.keep(self.envs.recv())

    def keep(self, batch: Batch) -> None:
        """Hold ``batch``'s observations for the next ``act`` (copied: the next ``send`` reuses the buffers)."""
        obs, _, _, _, _, env_ids, masks = batch
        self.pending = (self._rows(env_ids), self._tensor(obs, copy=True), self._tensor(masks, copy=True))

    def act(self) -> None:
        """The policy acts on the pending rows; their actions are sent."""
        rows, obs, masks = self.pending
        self.pending = None
        r = self.rollout
        at = r.counts[rows]
        valid, reset = step_flags(self.autoreset, masks, self.prev_ended[rows], self.prev_valid[rows])
        r.obs[at, rows] = obs
        r.valid[at, rows] = valid
        r.resets[at, rows] = reset
        state = None
        if self.state is not None:
            state = zero_where(self.state[rows], reset)
            r.states[at, rows] = state
        with torch.no_grad():
            distribution, value, state = self.policy.act(obs, state)
            action = distribution.sample()
        r.actions[at, rows], r.logprobs[at, rows], r.values[at, rows] = action, distribution.log_prob(action), value
        if state is not None:
            self.state[rows] = state
        r.counts[rows] += 1
        self.envs.send(self.to_env_actions(action))

    def record(self, batch: Batch) -> int:
        """Store what ``batch`` returns for its rows' steps in flight; returns how many steps it completed.

        Sets ``full`` when one of them was a row's last step of the rollout; the batch's
        observations are then kept for the next rollout, else they are pending for ``act``.
        """
        obs, rewards, terminals, truncations, infos, env_ids, masks = batch
        r = self.rollout
        rows = self._rows(env_ids)
        flight = r.counts[rows] > r.lengths[rows]
        done, at = rows[flight], r.lengths[rows][flight]
        ended = self._tensor(terminals | truncations)[flight]
        r.rewards[at, done] = self.learner_rewards(self._tensor(rewards)[flight])
        r.terminals[at, done] = self._tensor(terminals)[flight]
        r.ended[at, done] = ended
        self.prev_ended[done] = ended
        if infos:
            self._read_infos(infos, terminals, truncations, rows)
        self.prev_valid[done] = r.valid[at, done]
        r.lengths[done] += 1
        self.full = bool((r.lengths[done] >= r.steps).any())
        self.keep(batch)
        return len(done)

    def _read_infos(self, infos: list, terminals: np.ndarray, truncations: np.ndarray, rows: torch.Tensor) -> None:
        """Faulted steps do not count; truncated steps of same-step autoreset keep V(final observation)."""
        r = self.rollout
        position = {int(row): i for i, row in enumerate(rows.tolist())}
        finals: list[tuple[int, Any]] = []
        for info in infos:
            row = int(info["env_id"])
            if r.counts[row] == r.lengths[row]:  # no step in flight: the reset's own info
                continue
            if "fault" in info:  # the env crashed (on_fault="restart"): this step taught nothing,
                r.valid[r.lengths[row], row] = False  # and the row holds a new episode's first observation
                self.prev_ended[row] = False
            elif "final_observation" in info:
                i = position[row]
                if truncations[i] and not terminals[i]:
                    finals.append((row, info["final_observation"]))
        if finals:
            final_rows = torch.tensor([row for row, _ in finals], device=self.device)
            obs = self._tensor(np.stack([final for _, final in finals]))
            state = None if self.state is None else self.state[final_rows]
            with torch.no_grad():
                value = self.policy.value(obs, state)
            at = r.lengths[final_rows]
            r.final_values[at, final_rows] = value
            r.has_final[at, final_rows] = True

    # ---------------------------------------------------------------- rollouts
    def bootstrap(self) -> None:
        """The pending rows' bootstrap values, ``V(obs)`` with their states, after their last steps."""
        rows, obs, masks = self.pending
        state = None
        if self.state is not None:
            _, reset = step_flags(self.autoreset, masks, self.prev_ended[rows], self.prev_valid[rows])
            state = zero_where(self.state[rows], reset)
        with torch.no_grad():
            self.rollout.values[self.rollout.lengths[rows], rows] = self.policy.value(obs, state)

    def _rows(self, env_ids: Any) -> torch.Tensor:
        if len(env_ids) == len(self.all_rows):
            return self.all_rows  # a full batch: rows 0 … num_envs - 1, in order
        return torch.as_tensor(np.asarray(env_ids, dtype=np.int64), device=self.device)

    def _tensor(self, array: np.ndarray, copy: bool = False) -> torch.Tensor:
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        if copy and tensor.device == self.device:
            return tensor.clone()
        return tensor.to(self.device)
