"""`puffer_core.train.recurrent`: when a row's state starts afresh, and the LSTM's replay of a
rollout giving what its step-by-step run gave."""

from __future__ import annotations

import pytest
from optional import require

torch = require("torch")

from puffer_core.train.recurrent import Memory, step_flags  # noqa: E402

T, F = True, False


def flags(*values: bool) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bool)


@pytest.mark.parametrize(
    ("autoreset", "mask", "prev_ended", "prev_valid", "valid", "reset"),
    [
        # the middle of an episode: counts, state carried
        ("next_step", T, F, T, T, F),
        ("same_step", T, F, T, T, F),
        # the step after an end: next-step shows the episode's last observation (no transition,
        # state kept for its value); same-step shows the next episode's first (a real step, fresh state)
        ("next_step", T, T, T, F, F),
        ("same_step", T, T, T, T, T),
        # the step after that one (next-step's reset observation), a fault, or a row's first step
        ("next_step", T, F, F, T, T),
        ("same_step", T, F, F, T, T),
        # a masked row: a dead agent's zeroed row never counts and holds no state
        ("next_step", F, F, T, F, T),
        ("same_step", F, F, T, F, T),
        ("next_step", F, T, F, F, T),
    ],
)
def test_step_flags(autoreset, mask, prev_ended, prev_valid, valid, reset):
    got_valid, got_reset = step_flags(autoreset, flags(mask), flags(prev_ended), flags(prev_valid))
    assert (got_valid.tolist(), got_reset.tolist()) == ([valid], [reset])


@pytest.mark.parametrize("chance", [0.0, 0.3, 1.0])  # no reset (one stretch), some, a reset every step
def test_unroll_replays_the_steps_and_zeroes_where_told(chance):
    torch.manual_seed(0)
    memory = Memory(3, 5)
    x = torch.randn(6, 4, 3)
    resets = torch.rand(6, 4) < chance
    start = torch.randn(4, 2, 5)
    unrolled = memory.unroll(x, start, resets)
    state, outputs = start, []
    for t in range(6):
        state = torch.where(resets[t][:, None, None], torch.zeros_like(state), state)
        out, state = memory.step(x[t], state)
        outputs.append(out)
    torch.testing.assert_close(unrolled, torch.stack(outputs))
    # a reset makes the past irrelevant: the same inputs from another start give the same outputs
    resets[2] = True
    again = memory.unroll(x, torch.randn(4, 2, 5), resets)
    first = memory.unroll(x, start, resets)
    torch.testing.assert_close(again[2:], first[2:])
    assert chance == 1.0 or not torch.allclose(again[:2], first[:2])


def test_unroll_trains_as_the_steps_do():
    torch.manual_seed(1)
    memory = Memory(3, 5)
    x, start, resets = torch.randn(8, 4, 3), torch.randn(4, 2, 5), torch.rand(8, 4) < 0.2
    memory.unroll(x, start, resets).square().sum().backward()
    replayed = [p.grad.clone() for p in memory.parameters()]
    memory.zero_grad()
    state, loss = start, 0
    for t in range(8):
        out, state = memory.step(x[t], state * (~resets[t]).float()[:, None, None])
        loss = loss + out.square().sum()
    loss.backward()
    for got, want in zip(replayed, (p.grad for p in memory.parameters())):
        torch.testing.assert_close(got, want)


def test_a_state_dict_in_the_per_step_cells_layout_loads():
    # checkpoints written while Memory held an nn.LSTMCell name its tensors after the cell's
    memory = Memory(3, 5)
    cell = torch.nn.LSTMCell(3, 5)
    memory.load_state_dict({f"cell.{name}": value for name, value in cell.state_dict().items()})
    x, state = torch.randn(2, 3), torch.randn(2, 2, 5)
    h, c = cell(x, (state[:, 0], state[:, 1]))
    out, new = memory.step(x, state)
    torch.testing.assert_close(out, h)
    torch.testing.assert_close(new, torch.stack((h, c), dim=1))


def test_initialisation_is_cleanrls():
    memory = Memory(7, 6)
    for name, parameter in memory.lstm.named_parameters():
        if name.startswith("bias"):
            assert not parameter.any(), name
        else:  # orthogonal: the rows of each weight matrix are orthonormal (4 gates of 6 rows, fewer columns)
            w = parameter.detach()
            gram = w.T @ w if w.shape[0] > w.shape[1] else w @ w.T
            torch.testing.assert_close(gram, torch.eye(len(gram)), atol=1e-5, rtol=0)
