"""``glyphs_crop``: the map around the agent, as an observation key of its own.

Agents that learn NetHack look at the few cells around the ``@`` closely (NLE's baseline
model runs a CNN over a 9x9 crop beside the one over the whole map): what is next to you
decides whether to fight, eat, pick up or take the stairs. ``observation_keys=("glyphs_crop",
"blstats")`` asks for it; ``GlyphCrop`` computes it from nle's ``glyphs`` and the agent's
position in ``blstats`` after every step, padding beyond the map's edge with the blank glyph
(what NetHack shows for unexplored rock), so the agent is always at the centre.

The centre cell shows what the agent stands on rather than the agent itself (always there,
so it says nothing): NetHack draws the ``@`` over the staircase, fountain or item beneath it,
so the crop remembers what the map showed at that cell the step before the agent entered it
(blank when it showed a monster, on a new level and after a reset: unknown). Without it a
policy with no memory cannot tell that it stands on the stairs down, where ``>`` descends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffer_plugin_nethack.wrappers import bind_nle_buffers, find_nle

__all__ = ["CROP_KEY", "CROP_SIZE", "GlyphCrop", "blank_glyph"]

#: The plugin's own observation key: the glyphs around the agent (``puffer_plugin_nethack.crop``),
#: ``CROP_SIZE`` x ``CROP_SIZE`` unless the ``crop_size`` kwarg says otherwise.
CROP_KEY = "glyphs_crop"
CROP_SIZE = 9

# Indices into blstats (nle.nethack.NLE_BL_X, _Y, _DNUM, _DLEVEL), the same in nle 0.9 through 1.3.
_BL_X, _BL_Y, _BL_DNUM, _BL_DLEVEL = 0, 1, 23, 24


def blank_glyph() -> int:
    """The glyph of unexplored rock (``S_stone``), what the map holds where nothing is seen."""
    from nle import nethack

    return int(nethack.GLYPH_CMAP_OFF)


def monster_glyphs() -> tuple[tuple[int, int], ...]:
    """The glyph id ranges ``[low, high)`` that show a monster (pets, ridden ones and the like
    included), which moves away: not what a cell holds."""
    from nle import nethack

    return ((nethack.GLYPH_MON_OFF, nethack.GLYPH_BODY_OFF), (nethack.GLYPH_RIDDEN_OFF, nethack.GLYPH_OBJ_OFF))


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
        self._monsters = monster_glyphs()
        self._crop = np.full((size, size), self._blank, dtype=glyphs.dtype)
        self._previous = np.full(glyphs.shape, self._blank, dtype=glyphs.dtype)  # the map one step ago
        self._under, self._where = self._blank, (-1, -1, -1, -1)  # (x, y, dungeon, level)

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self._where = (-1, -1, -1, -1)
        return self._observe(obs), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(obs), reward, terminated, truncated, info

    def _standing_on(self, glyphs: np.ndarray, blstats: np.ndarray) -> int:
        """What the agent stands on, as far as the map showed it before it stepped there."""
        where = (int(blstats[_BL_X]), int(blstats[_BL_Y]), int(blstats[_BL_DNUM]), int(blstats[_BL_DLEVEL]))
        before, self._where = self._where, where
        if where[2:] != before[2:]:  # a reset or a new level: unknown
            self._under = self._blank
        elif where[:2] != before[:2]:
            seen = int(self._previous[where[1], where[0]])
            self._under = self._blank if any(low <= seen < high for low, high in self._monsters) else seen
        np.copyto(self._previous, glyphs)
        return self._under

    def _observe(self, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        glyphs, crop, r = obs["glyphs"], self._crop, self._radius
        x, y = int(obs["blstats"][_BL_X]), int(obs["blstats"][_BL_Y])
        under = self._standing_on(glyphs, obs["blstats"])
        rows, columns = glyphs.shape
        top, left = y - r, x - r
        y0, y1 = max(top, 0), min(top + self.size, rows)
        x0, x1 = max(left, 0), min(left + self.size, columns)
        crop.fill(self._blank)
        if y0 < y1 and x0 < x1:
            crop[y0 - top : y1 - top, x0 - left : x1 - left] = glyphs[y0:y1, x0:x1]
        crop[r, r] = under
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
