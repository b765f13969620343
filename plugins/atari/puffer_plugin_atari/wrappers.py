"""Wrappers the Atari creator applies: frame stacking and life-aware episode statistics."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["AtariEpisodeStats", "FrameStack"]


class FrameStack(gymnasium.Wrapper):
    """The last ``num_stack`` observations stacked on a new leading axis (channel-first).

    A plain array, not gymnasium's LazyFrames / FrameStackObservation, so the same code runs
    on gymnasium 0.29 and 1.x and the emulator copies one contiguous block. At reset the
    first frame fills every slot.
    """

    def __init__(self, env: gymnasium.Env, num_stack: int):
        super().__init__(env)
        if num_stack < 1:
            raise ValueError(f"frame_stack must be >= 1, got {num_stack}")
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise TypeError(f"FrameStack needs a Box observation space, got {space}")
        self.num_stack = num_stack
        self.frames = np.zeros((num_stack, *space.shape), dtype=space.dtype)
        self.observation_space = spaces.Box(
            low=np.broadcast_to(space.low, self.frames.shape).copy(),
            high=np.broadcast_to(space.high, self.frames.shape).copy(),
            dtype=space.dtype,
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.frames[:] = obs
        return self.frames.copy(), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames[:-1] = self.frames[1:]  # overlapping copy: numpy handles it as memmove
        self.frames[-1] = obs
        return self.frames.copy(), reward, terminated, truncated, info


class AtariEpisodeStats(gymnasium.Wrapper):
    """An episode is the whole game; lives are reported, never turned into episode ends.

    Every step on which a life is lost carries ``info["life_lost"] = True`` (the per-life
    signal); the final step carries ``info["episode_stats"]`` with ``lives_lost`` and
    ``start_lives``. ALE's own info already holds ``lives`` (left at the end: 0 after a game
    over, more when the episode was truncated) and ``episode_frame_number`` (emulator frames
    played, frameskip included), so they are not repeated here.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.ale = env.unwrapped.ale
        self.start_lives = self.lives = 0
        self.lives_lost = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.start_lives = self.lives = int(self.ale.lives())
        self.lives_lost = 0
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = int(self.ale.lives())
        if lives < self.lives:
            self.lives_lost += self.lives - lives
            info = dict(info)
            info["life_lost"] = True
        self.lives = lives
        if terminated or truncated:
            info = dict(info)
            info["episode_stats"] = self.episode_stats()
        return obs, reward, terminated, truncated, info

    def episode_stats(self) -> dict[str, Any]:
        return {"lives_lost": self.lives_lost, "start_lives": self.start_lives}
