"""An env whose process dies mid-episode, in a module of its own: each restarted worker
imports only this (not the torch-heavy test module) to rebuild it."""

from __future__ import annotations

import os

from puffer_core.plugins.builtin.probes import DebugProbeEnv


class CrashingProbe(DebugProbeEnv):
    """Probe 1 (V = 1) whose process dies on every third step (os._exit): a third of all steps crash."""

    def __init__(self):
        super().__init__(1)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps % 3 == 0:
            os._exit(7)
        return super().step(action)
