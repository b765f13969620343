"""A test env that says which Ray node it runs on, in a module of its own so that the Ray
actors that build it import little (it travels to them by value)."""

from __future__ import annotations

import time

import gymnasium


class NodeCartPole(gymnasium.Wrapper):
    """CartPole whose ``node_id`` is the Ray node id of the process stepping it; setting
    ``pause`` makes its next step take that many seconds longer (a step in flight)."""

    def __init__(self):
        super().__init__(gymnasium.make("CartPole-v1"))
        self.pause = 0.0

    def step(self, action):
        if self.pause:
            time.sleep(self.pause)
            self.pause = 0.0
        return self.env.step(action)

    @property
    def node_id(self) -> str | None:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
