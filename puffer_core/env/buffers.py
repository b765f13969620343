"""``Buffers``: the arrays one env writes into (observations, rewards, flags, masks), one row
per agent slot; the vector layer hands in slices of its shared memory."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from puffer_core.errors import APIUsageError

__all__ = ["Buffers"]


@dataclass
class Buffers:
    """The arrays one env writes into; rows are agent slots. The vector layer hands in slices
    of its shared memory, and the emulator only ever writes into them in place."""

    observations: np.ndarray  # (num_agents, *observation_space.shape), flat dtype
    rewards: np.ndarray  # (num_agents,) float32
    terminals: np.ndarray  # (num_agents,) bool
    truncations: np.ndarray  # (num_agents,) bool
    masks: np.ndarray  # (num_agents,) bool

    @classmethod
    def allocate(cls, num_agents: int, observation_space: spaces.Box) -> Buffers:
        return cls(
            observations=np.zeros((num_agents, *observation_space.shape), observation_space.dtype),
            rewards=np.zeros(num_agents, np.float32),
            terminals=np.zeros(num_agents, bool),
            truncations=np.zeros(num_agents, bool),
            masks=np.zeros(num_agents, bool),
        )

    def copy_into(self, other: Buffers) -> None:
        """Copy every array's contents into ``other``'s arrays (same shapes)."""
        for name in ("observations", "rewards", "terminals", "truncations", "masks"):
            getattr(other, name)[...] = getattr(self, name)

    def check(self, num_agents: int, observation_space: spaces.Box, owner: str) -> None:
        """Raise APIUsageError naming the first array that does not fit the env."""
        expected = {
            "observations": ((num_agents, *observation_space.shape), np.dtype(observation_space.dtype)),
            "rewards": ((num_agents,), np.dtype(np.float32)),
            "terminals": ((num_agents,), np.dtype(bool)),
            "truncations": ((num_agents,), np.dtype(bool)),
            "masks": ((num_agents,), np.dtype(bool)),
        }
        for name, (shape, dtype) in expected.items():
            array = getattr(self, name)
            if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != dtype:
                got = f"shape {array.shape} dtype {array.dtype}" if isinstance(array, np.ndarray) else repr(array)
                raise APIUsageError(
                    f"{owner}: Buffers.{name} must have shape {shape} and dtype {dtype}, got {got}; "
                    f"allocate it with Buffers.allocate({num_agents}, emulator.observation_space) or slice "
                    "shared memory to that shape"
                )
            if not array.flags.writeable:
                raise APIUsageError(f"{owner}: Buffers.{name} is read-only; the emulator writes into it")
