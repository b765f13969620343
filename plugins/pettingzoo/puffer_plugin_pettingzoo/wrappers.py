"""Fixes for PettingZoo behaviour that hurts long vectorized runs.

PettingZoo's ``EnvLogger`` reports every illegal move of a classic game (the mover loses
and the game ends) by *printing* to stdout, and appends each message to a class-level
list that is never emptied. Random or early-training agents make illegal moves all the
time, so a long run floods stdout (breaking ``puffer run --json``) and grows that list
without bound. ``QuietEnvLogger`` silences the print around each call, takes back the
messages the call added, and re-issues each distinct one once as a Python warning (on
stderr, deduplicated by the warnings filter).
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["PettingZooEnvWarning", "QuietEnvLogger"]


class PettingZooEnvWarning(UserWarning):
    """A message PettingZoo's EnvLogger would have printed (e.g. an illegal move ended a game)."""


class QuietEnvLogger:
    """A PettingZoo Parallel env whose EnvLogger messages become deduplicated warnings."""

    def __init__(self, env: Any, env_id: str = "pettingzoo"):
        self.env = env
        self.env_id = env_id

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (during unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.env, name)

    def _quietly(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        from pettingzoo.utils.env_logger import EnvLogger

        queue = EnvLogger.mqueue
        start = len(queue)
        was_printing = getattr(EnvLogger, "_output", True)
        EnvLogger.suppress_output()
        try:
            return call(*args, **kwargs)
        finally:
            if was_printing:
                EnvLogger.unsuppress_output()
            added = queue[start:]
            del queue[start:]
            for message in dict.fromkeys(str(m) for m in added):
                warnings.warn(f"{self.env_id}: {message}", PettingZooEnvWarning, stacklevel=3)

    def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
        return self._quietly(self.env.reset, seed=seed, options=options)

    def step(self, actions: dict) -> Any:
        return self._quietly(self.env.step, actions)

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()
