"""``glyphs_crop``: the map around the agent, as an observation key of its own.

Agents that learn NetHack look at the few cells around the ``@`` closely (NLE's baseline
model runs a CNN over a 9x9 crop beside the one over the whole map): what is next to you
decides whether to fight, eat, pick up or take the stairs. ``observation_keys=("glyphs_crop",
"blstats")`` asks for it; ``GlyphCrop`` computes it from nle's ``glyphs`` and the agent's
position in ``blstats`` after every step, padding beyond the map's edge with the blank glyph
(what NetHack shows for unexplored rock), so the agent is always at the centre.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffer_plugin_nethack.envs import CROP_KEY, CROP_SIZE
from puffer_plugin_nethack.wrappers import bind_nle_buffers, find_nle

__all__ = ["GlyphCrop", "blank_glyph"]
# Indices into blstats (nle.nethack.NLE_BL_X, NLE_BL_Y), the same in nle 0.9 through 1.3.
_BL_X, _BL_Y = 0, 1


def blank_glyph() -> int:
    """The glyph of unexplored rock (``S_stone``), what the map holds where nothing is seen."""
    from nle import nethack

    return int(nethack.GLYPH_CMAP_OFF)


class GlyphCrop(gymnasium.Wrapper):
    """Adds ``glyphs_crop`` (``size`` x ``size`` glyphs centred on the agent) to nle's
    observation and keeps only ``keys`` (nle observes ``glyphs`` and ``blstats`` for it, asked
    for or not)."""

    def __init__(self, env: gymnasium.Env, keys: tuple[str, ...], size: int = CROP_SIZE):
        super().__init__(env)
        inner = env.observation_space
        glyphs = inner["glyphs"]
        crop_space = spaces.Box(int(glyphs.low.min()), int(glyphs.high.max()), (size, size), glyphs.dtype)
        self.keys = tuple(keys)
        self.observation_space = spaces.Dict({key: crop_space if key == CROP_KEY else inner[key] for key in keys})
        self.size, self._radius = size, size // 2
        self._blank = blank_glyph()
        self._crop = np.full((size, size), self._blank, dtype=glyphs.dtype)

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        return self._observe(obs), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(obs), reward, terminated, truncated, info

    def _observe(self, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        glyphs, crop, r = obs["glyphs"], self._crop, self._radius
        x, y = int(obs["blstats"][_BL_X]), int(obs["blstats"][_BL_Y])
        rows, columns = glyphs.shape
        top, left = y - r, x - r
        y0, y1 = max(top, 0), min(top + self.size, rows)
        x0, x1 = max(left, 0), min(left + self.size, columns)
        crop.fill(self._blank)
        if y0 < y1 and x0 < x1:
            crop[y0 - top : y1 - top, x0 - left : x1 - left] = glyphs[y0:y1, x0:x1]
        return {key: crop if key == CROP_KEY else obs[key] for key in self.keys}

    def puffer_bind_observation(self, views: Any) -> bool:
        """Puffer Core's emulator hook: nle writes its keys into ``views`` and the crop is
        computed into its own view, so the emulator copies nothing."""
        if not isinstance(views, Mapping):
            return False
        view = views.get(CROP_KEY)
        if not (isinstance(view, np.ndarray) and view.shape == self._crop.shape and view.dtype == self._crop.dtype):
            return False
        others = {key: value for key, value in views.items() if key != CROP_KEY}
        if others and not bind_nle_buffers(find_nle(self.env), others):
            return False
        view[...] = self._crop
        self._crop = view
        return True
