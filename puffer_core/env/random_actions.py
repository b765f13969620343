"""Uniformly random flat actions: what `puffer run`, the benches, autotune and the
conformance checks step emulated envs with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["masked_random_actions", "random_action_batches", "random_actions"]


def random_actions(space: spaces.Space, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` uniformly random flat actions for a Discrete, MultiDiscrete, MultiBinary or Box space.

    Raises:
        TypeError: ``space`` is none of those (emulated envs' action spaces always are).
    """
    if isinstance(space, spaces.Discrete):
        return rng.integers(0, space.n, size=count) + space.start
    if isinstance(space, spaces.MultiDiscrete):
        return rng.integers(0, space.nvec, size=(count, *space.nvec.shape)) + space.start
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, size=(count, *space.shape), dtype=np.int8)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        if np.issubdtype(space.dtype, np.integer):
            return rng.integers(low, high + 1, size=(count, *space.shape)).astype(space.dtype)
        return rng.uniform(low, high, size=(count, *space.shape)).astype(space.dtype)
    raise TypeError(f"cannot sample random actions from {space!r}; emulated envs use Discrete/MultiDiscrete/Box")


def random_action_batches(space: spaces.Space, rows: int, count: int, seed: int) -> np.ndarray:
    """``count`` batches of ``rows`` random flat actions, drawn at once, so that a timed loop
    pays nothing for drawing them."""
    rng = np.random.default_rng(seed)
    flat = random_actions(space, rows * count, rng)
    return flat.reshape(count, rows, *flat.shape[1:])


def masked_random_actions(envs: Any) -> Callable[[np.ndarray, np.random.Generator], np.ndarray] | None:
    """For a vector env with a Discrete action space whose observations carry an
    ``action_mask`` of its size (PettingZoo's board games: an illegal move ends the game at
    once), a sampler of random actions among the allowed ones, one per observation row;
    None for any other env."""
    space = envs.single_action_space
    if not isinstance(space, spaces.Discrete):
        return None
    probe = envs.unflatten_observation(
        np.zeros((1, *envs.single_observation_space.shape), envs.single_observation_space.dtype)
    )
    mask = probe.get("action_mask") if isinstance(probe, dict) else None
    if mask is None or mask.shape != (1, space.n):
        return None

    def sample(observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        allowed = envs.unflatten_observation(observations)["action_mask"] > 0
        # The allowed action with the highest uniform draw is a uniform pick among them; a row
        # with none allowed (an agent whose turn it is not) gets any action: it is ignored.
        draws = rng.random(allowed.shape)
        draws[~allowed] -= 1.0
        return draws.argmax(axis=1) + space.start

    return sample
