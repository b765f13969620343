"""`puffer_core.train.rollout`: GAE over rows of different lengths, and the carry of a step in
flight into the next rollout. With every row full it is the GAE the trainer always computed."""

from __future__ import annotations

import numpy as np
import pytest
from optional import require

torch = require("torch")

from puffer_core.train.rollout import Rollout, advantages  # noqa: E402

GAMMA, LAMBDA = 0.9, 0.8


def filled(steps: int, rows: int, seed: int = 0) -> Rollout:
    """A rollout of random rewards, values and episode ends, every row full."""
    generator = torch.Generator().manual_seed(seed)
    r = Rollout(steps, rows, (3,), np.dtype(np.float32), (), torch.int64, torch.device("cpu"), state_shape=(2, 4))
    r.rewards.copy_(torch.randn(steps, rows, generator=generator))
    r.values.copy_(torch.randn(steps + 1, rows, generator=generator))
    r.terminals.copy_(torch.rand(steps, rows, generator=generator) < 0.15)
    r.ended.copy_(r.terminals | (torch.rand(steps, rows, generator=generator) < 0.15))
    r.valid.fill_(True)
    r.lengths.fill_(steps)
    r.counts.fill_(steps)
    return r


def gae_as_it_was(r: Rollout, next_value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The trainer's GAE before rows had lengths (every row ``steps`` long, ``next_value`` after them)."""
    values = r.values[:-1]
    keep, chain = (~r.terminals).float(), (~r.ended).float()
    out, running = torch.zeros_like(values), torch.zeros_like(next_value)
    for t in reversed(range(r.steps)):
        following = next_value if t == r.steps - 1 else values[t + 1]
        delta = r.rewards[t] + GAMMA * following * keep[t] - values[t]
        running = delta + GAMMA * LAMBDA * chain[t] * running
        out[t] = running
    return out, out + values


def one_row(rewards, values, terminals, ended, bootstrap) -> list[float]:
    """GAE of one row's steps written out step by step, bootstrapping from ``bootstrap`` after the last."""
    out, running = [], 0.0
    for t in reversed(range(len(rewards))):
        following = bootstrap if t == len(rewards) - 1 else values[t + 1]
        delta = rewards[t] + GAMMA * following * (not terminals[t]) - values[t]
        running = delta + (GAMMA * LAMBDA * running if not ended[t] and t < len(rewards) - 1 else 0.0)
        out.append(running)
    return out[::-1]


@pytest.mark.parametrize("seed", range(3))
def test_full_rows_give_the_gae_of_before(seed):
    r = filled(16, 5, seed)
    adv, returns = advantages(r, GAMMA, LAMBDA)
    old_adv, old_returns = gae_as_it_was(r, r.values[-1])
    torch.testing.assert_close(adv, old_adv)
    torch.testing.assert_close(returns, old_returns)


def test_rows_of_different_lengths_stop_and_bootstrap_at_their_own_last_step():
    r = filled(8, 4, seed=1)
    lengths = [8, 5, 1, 0]
    r.lengths.copy_(torch.tensor(lengths))
    for row, length in enumerate(lengths):  # the bootstrap value sits right after a row's last step
        r.values[length, row] = 10.0 + row
    adv, _ = advantages(r, GAMMA, LAMBDA)
    for row, length in enumerate(lengths):
        if length == 0:
            continue
        expected = one_row(
            r.rewards[:length, row].tolist(),
            r.values[:length, row].tolist(),
            r.terminals[:length, row].tolist(),
            r.ended[:length, row].tolist(),
            10.0 + row,
        )
        np.testing.assert_allclose(adv[:length, row].numpy(), expected, rtol=1e-5, atol=1e-5)
    counted = r.counted()
    assert counted.sum(0).tolist() == lengths  # every step inside a row counts here, none past it


def test_garbage_past_a_row_does_not_reach_its_steps():
    r = filled(6, 2, seed=2)
    r.lengths.copy_(torch.tensor([6, 3]))
    before, _ = advantages(r, GAMMA, LAMBDA)
    r.rewards[3:, 1] = float("nan")
    r.values[4:, 1] = float("inf")
    after, _ = advantages(r, GAMMA, LAMBDA)
    torch.testing.assert_close(after[:3, 1], before[:3, 1])
    torch.testing.assert_close(after[:, 0], before[:, 0])


def test_same_step_truncations_bootstrap_from_the_final_observations_value():
    r = filled(4, 1, seed=3)
    r.terminals.fill_(False)
    r.ended.fill_(False)
    r.ended[1, 0] = True  # truncated at step 1: the next step is the next episode's first
    r.final_values[1, 0], r.has_final[1, 0] = 7.0, True
    adv, _ = advantages(r, GAMMA, LAMBDA)
    assert adv[1, 0].item() == pytest.approx(r.rewards[1, 0].item() + GAMMA * 7.0 - r.values[1, 0].item())


def test_a_step_in_flight_becomes_step_0_of_the_next_rollout():
    r = filled(4, 3, seed=4)
    r.obs.copy_(torch.arange(4 * 3 * 3, dtype=torch.float32).reshape(4, 3, 3))
    r.states.copy_(torch.randn(4, 3, 2, 4))
    r.actions.copy_(torch.arange(12).reshape(4, 3))
    r.resets.copy_(torch.rand(4, 3) < 0.5)
    # row 0: 4 steps complete; row 1: 2 complete and its step 2 in flight; row 2: its step 0 in flight
    r.lengths.copy_(torch.tensor([4, 2, 0]))
    r.counts.copy_(torch.tensor([4, 3, 1]))
    kept = {name: getattr(r, name).clone() for name in ("obs", "states", "actions", "logprobs", "values", "resets")}
    r.begin()
    assert r.counts.tolist() == [0, 1, 1] and r.lengths.tolist() == [0, 0, 0]
    for name, before in kept.items():
        after = getattr(r, name)
        torch.testing.assert_close(after[0, 1], before[2, 1], msg=name)
        torch.testing.assert_close(after[0, 2], before[0, 2], msg=name)
        torch.testing.assert_close(after[0, 0], before[0, 0], msg=name)  # row 0 starts empty: untouched
