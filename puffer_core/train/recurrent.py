"""Recurrent state: the LSTM a ``policy="lstm"`` policy carries, and when a row's state starts afresh.

One state per agent row, ``(h, c)`` stacked as a ``[rows, 2, hidden]`` tensor so that rows
index it like every other per-row tensor. A row's state is zeroed before a step whose
observation does not continue the episode the state has seen (``step_flags``):

- the row is masked now (a dead agent's zeroed row, or one that has not joined yet);
- its previous step did not count: the step after an episode's end under next-step
  autoreset (its observation is the episode's last one, its action ignored: the step
  after it holds the new episode's first observation), a faulted step, a masked row;
- ``same_step`` autoreset only: the row's episode ended on its previous step, whose
  results already hold the next episode's first observation.

Under next-step autoreset the observation right after an end is the ended episode's last
one, so the state is kept for it: the value a truncated episode bootstraps from is that
observation's value, computed with the state that saw the episode.

The rollout stores, per step, the state the policy acted with (already zeroed where the
flag says) and the flag, so the update replays each row's steps exactly from its first
stored state (``Memory.unroll``), as CleanRL's ppo_atari_lstm.py does.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

__all__ = ["Memory", "step_flags"]


def step_flags(
    autoreset: str, masks: torch.Tensor, prev_ended: torch.Tensor, prev_valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the step counts, the row's state starts afresh) for rows about to act.

    Args:
        autoreset: the vector env's mode, ``"next_step"`` or ``"same_step"``.
        masks: the rows hold a live agent now.
        prev_ended: the row's previous step ended its episode (terminal or truncated).
        prev_valid: the row's previous step counted (False before a row's first step).
    """
    if autoreset == "same_step":
        return masks, ~masks | prev_ended | ~prev_valid
    return masks & ~prev_ended, ~masks | ~prev_valid


def zero_where(state: torch.Tensor, reset: torch.Tensor) -> torch.Tensor:
    """``state`` with the rows where ``reset`` is True zeroed."""
    return state * (~reset).to(state.dtype)[:, None, None]


#: ``nn.LSTMCell``'s parameter names (the layout of checkpoints written before ``Memory``
#: held an ``nn.LSTM``) and the one-layer ``nn.LSTM``'s for the same tensors.
_CELL_NAMES = {name: f"{name}_l0" for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}


class Memory(nn.Module):
    """A one-layer LSTM over each row's steps; CleanRL's initialisation: orthogonal weights,
    zero biases.

    A replay runs ``nn.LSTM`` over the stretches of steps between the steps where some row
    starts afresh, zeroing those rows' state between stretches: one native call per stretch
    instead of a Python-level cell per step, which pays wherever episodes run for many steps
    between resets; where nearly every step has a reset (episodes of a step or two) the
    stretches are a step long and the calls cost as much as the cells would.
    """

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.lstm = nn.LSTM(inputs, hidden)
        for name, parameter in self.lstm.named_parameters():
            if name.startswith("bias"):
                nn.init.constant_(parameter, 0.0)
            else:
                nn.init.orthogonal_(parameter, 1.0)

    def initial_state(self, rows: int, device: torch.device | str = "cpu") -> torch.Tensor:
        return torch.zeros(rows, 2, self.hidden, device=device)

    def _run(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The LSTM over ``x [steps, rows, inputs]`` from ``state``: (outputs [steps, rows, hidden], the new state)."""
        out, (h, c) = self.lstm(x, (state[None, :, 0].contiguous(), state[None, :, 1].contiguous()))
        return out, torch.stack((h[0], c[0]), dim=1)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of rows ``x [rows, inputs]`` from ``state``: (outputs [rows, hidden], the new state)."""
        out, state = self._run(x[None], state)
        return out[0], state

    def unroll(self, x: torch.Tensor, state: torch.Tensor, resets: torch.Tensor) -> torch.Tensor:
        """Outputs ``[steps, rows, hidden]`` for inputs ``x [steps, rows, inputs]`` from ``state``,
        zeroing a row's state before every step where ``resets [steps, rows]`` says so."""
        starts = [0, *(t for t in resets.any(dim=1).nonzero().flatten().tolist() if t > 0), len(x)]
        outputs = []
        for start, end in itertools.pairwise(starts):
            out, state = self._run(x[start:end], zero_where(state, resets[start]))
            outputs.append(out)
        return torch.cat(outputs)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        # a checkpoint from before nn.LSTM names the same four tensors after nn.LSTMCell's
        for cell_name, lstm_name in _CELL_NAMES.items():
            if prefix + "cell." + cell_name in state_dict:
                state_dict[prefix + "lstm." + lstm_name] = state_dict.pop(prefix + "cell." + cell_name)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
