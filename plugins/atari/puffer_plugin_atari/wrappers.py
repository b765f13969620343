"""Wrappers the Atari creator applies: frame stacking and life-aware episode statistics.

Zero copy. Puffer Core's emulator offers its flat observation buffer (in a vector env, a row
of shared memory) to ``AtariEpisodeStats.puffer_bind_observation``, which passes it on:

* with the preprocessing, to ``FrameStack``, which then keeps its stack *in* that buffer:
  a step shifts the three older frames down one slot (oldest first, as before) and writes
  the new frame into the last, and the emulator copies nothing. The stack's storage is
  then the observation row itself, so whoever receives the observations must read them,
  not write into them (writing changes the next three stacked observations);
* with ``preprocess=False``, to ALE itself: the env's observation getter renders the
  screen (or RAM) straight into the buffer (``getScreenRGB(out)``) instead of into a new
  array the emulator would copy.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["AtariEpisodeStats", "FrameStack", "bind_ale_screen"]


class FrameStack(gymnasium.Wrapper):
    """The last ``num_stack`` observations stacked on a new leading axis (channel-first).

    A plain array, not gymnasium's LazyFrames / FrameStackObservation, so the same code runs
    on gymnasium 0.29 and 1.x and the emulator copies one contiguous block, or nothing once
    the stack lives in the emulator's buffer (``puffer_bind_observation``). At reset the
    first frame fills every slot; frames run oldest to newest.
    """

    def __init__(self, env: gymnasium.Env, num_stack: int):
        super().__init__(env)
        if num_stack < 1:
            raise ValueError(f"frame_stack must be >= 1, got {num_stack}")
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise TypeError(f"FrameStack needs a Box observation space, got {space}")
        self.num_stack = num_stack
        #: True once ``frames`` is the emulator's buffer: observations are then that array
        #: itself, not a copy of it.
        self.bound = False
        self._use(np.zeros((num_stack, *space.shape), dtype=space.dtype))
        self.observation_space = spaces.Box(
            low=np.broadcast_to(space.low, self.frames.shape).copy(),
            high=np.broadcast_to(space.high, self.frames.shape).copy(),
            dtype=space.dtype,
        )

    def _use(self, frames: np.ndarray) -> None:
        """Keep the stack in ``frames`` (C-contiguous) from now on."""
        self.frames = frames
        # The shift by one frame as one memmove over raw bytes: a memoryview slice assignment
        # (CPython copies contiguous memory with memmove, overlap included) costs 0.4 us for
        # 4x84x84, where numpy's frames[:-1] = frames[1:] buffers the overlap (2.5 us).
        raw = memoryview(frames).cast("B")
        size = frames[0].nbytes
        self._shift = functools.partial(raw[: raw.nbytes - size].__setitem__, slice(None), raw[size:])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_shift", None)  # memoryviews do not pickle; rebuilt from the frames
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # A bound stack comes back as a private copy: unbound until an emulator binds it again.
        self.bound = False
        self._use(self.frames)

    def puffer_bind_observation(self, view: Any) -> bool:
        """Puffer Core's emulator hook: keep the stack in ``view`` (the observation row) from now on."""
        frames = self.frames
        if not (
            isinstance(view, np.ndarray)
            and view.shape == frames.shape
            and view.dtype == frames.dtype
            and view.flags.c_contiguous
            and view.flags.writeable
        ):
            return False
        if view is not frames:
            view[...] = frames  # the stack so far (the emulator moves to a new buffer before any reset)
            self._use(view)
        self.bound = True
        return True

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        frames = self.frames
        frames[:] = obs
        return (frames if self.bound else frames.copy()), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        frames = self.frames
        if len(frames) > 1:
            self._shift()  # oldest frame out, the rest one slot down
        frames[-1] = obs
        return (frames if self.bound else frames.copy()), reward, terminated, truncated, info


class _RenderInto:
    """``AtariEnv._get_obs`` replacement: ALE renders the observation into ``out``, which is returned."""

    def __init__(self, render: Any, out: np.ndarray):
        self.render = render
        self.out = out

    def __call__(self) -> np.ndarray:
        self.render(self.out)
        return self.out


def bind_ale_screen(atari: Any, view: Any) -> bool:
    """Make ``atari`` (an ``ale_py.env.AtariEnv``) render its observations into ``view``.

    ALE fills whatever array it is handed (``getScreenRGB(out)``, ``getScreenGrayscale(out)``,
    ``getRAM(out)``); the env's ``_get_obs``, which ``reset`` and ``step`` return, is replaced
    by one that renders into ``view`` and returns it. False (nothing changed) for sound
    observations, an unknown ``obs_type``, or a view that does not have the observation's
    shape, uint8 dtype and C layout.
    """
    ale = getattr(atari, "ale", None)
    render = {"rgb": "getScreenRGB", "grayscale": "getScreenGrayscale", "ram": "getRAM"}.get(
        getattr(atari, "_obs_type", None)
    )
    space = getattr(atari, "observation_space", None)
    if ale is None or render is None or getattr(atari, "sound_obs", False) or not isinstance(space, spaces.Box):
        return False
    if not callable(getattr(type(atari), "_get_obs", None)):
        return False  # an ale-py whose step does not go through _get_obs
    if not (
        isinstance(view, np.ndarray)
        and view.shape == tuple(space.shape)
        and view.dtype == np.uint8
        and view.flags.c_contiguous
        and view.flags.writeable
    ):
        return False
    atari._get_obs = _RenderInto(getattr(ale, render), view)
    return True


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

    def puffer_bind_observation(self, view: Any) -> bool:
        """Puffer Core's emulator hook, passed on to the frame stack or to ALE itself."""
        inner = self.env
        if isinstance(inner, FrameStack):
            return inner.puffer_bind_observation(view)
        if inner is inner.unwrapped:  # preprocess=False: ALE's own frames are the observations
            return bind_ale_screen(inner, view)
        return False  # the preprocessing without a stack makes a new frame each step: copied

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
