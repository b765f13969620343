"""The compatibility adapters, public face: gym 0.21–0.26 envs and old PettingZoo envs as
Gymnasium and PettingZoo Parallel ones. They are built-in plugins
(:mod:`puffer_core.plugins.builtin.adapters`); tests that build an env's path by hand import
them from here."""

from __future__ import annotations

from puffer_core.plugins.builtin.adapters import (
    GymAdapter,
    LegacyGymEnv,
    LegacyParallelEnv,
    LegacyPettingZooAdapter,
    to_gymnasium_space,
)

__all__ = ["GymAdapter", "LegacyGymEnv", "LegacyParallelEnv", "LegacyPettingZooAdapter", "to_gymnasium_space"]
