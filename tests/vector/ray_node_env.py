"""A test env that says which Ray node it runs on, in a module of its own so that the Ray
actors that build it import little (it travels to them by value)."""

from __future__ import annotations

import gymnasium


class NodeCartPole(gymnasium.Wrapper):
    """CartPole whose ``node_id`` is the Ray node id of the process stepping it."""

    def __init__(self):
        super().__init__(gymnasium.make("CartPole-v1"))

    @property
    def node_id(self) -> str | None:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
