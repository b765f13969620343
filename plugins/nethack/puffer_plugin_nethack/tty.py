"""NetHack's terminal as the ``"ansi"`` render mode: the 24x80 screen a player sees, in
its colours, for asciinema recordings (``puffer run nethack/score --record game.cast``)
and ``--watch``.

nle's own ``"ansi"`` mode prints the 21x79 map without colour, from the ``chars`` key.
Here nle also observes the ``tty_*`` keys; ``ColourTerminal`` renders them and drops them
from the observation, so recording never changes the observation space a policy sees.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["TTY_KEYS", "ColourTerminal", "tty_ansi"]

#: The observation keys the terminal is rendered from.
TTY_KEYS: tuple[str, ...] = ("tty_chars", "tty_colors", "tty_cursor")
_RESET = "\x1b[0m"


def tty_ansi(chars: np.ndarray, colors: np.ndarray) -> str:
    """The terminal as text with ANSI colours: one SGR code per run of one colour (NetHack's
    16 colours: bit 3 is bold), trailing blanks dropped, rows joined by newlines."""
    lines = []
    for row_chars, row_colors in zip(chars, colors):
        text = row_chars.tobytes().decode("latin-1")
        width = len(text.rstrip(" \0"))
        if width == 0:
            lines.append("")
            continue
        row_colors = row_colors[:width]
        starts = [0, *(np.flatnonzero(np.diff(row_colors)) + 1).tolist()]
        ends = [*starts[1:], width]
        parts = []
        for start, end in zip(starts, ends):
            color = int(row_colors[start])
            parts.append(f"\x1b[{1 if color & 8 else 0};3{color & 7}m{text[start:end]}")
        lines.append("".join(parts) + _RESET)
    return "\n".join(lines).replace("\0", " ")


class ColourTerminal(gymnasium.ObservationWrapper):
    """nle observing ``TTY_KEYS`` too: ``render()`` draws the coloured terminal and the
    observation keeps only ``keys``."""

    def __init__(self, env: gymnasium.Env, keys: tuple[str, ...]):
        super().__init__(env)
        self.keys = tuple(keys)
        self.observation_space = spaces.Dict({key: env.observation_space[key] for key in self.keys})

    @property
    def render_mode(self) -> str:
        return "ansi"

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {key: observation[key] for key in self.keys}

    def render(self) -> str:
        nle = self.env.unwrapped
        observed = dict(zip(nle._observation_keys, nle.last_observation))
        return tty_ansi(observed["tty_chars"], observed["tty_colors"])
