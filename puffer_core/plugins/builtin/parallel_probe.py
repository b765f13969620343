"""What every multi-agent probe shares: the PettingZoo Parallel API's space accessors, by duck
typing (no pettingzoo install needed), with one observation and one action space for all agents."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

__all__ = ["ParallelProbe"]


class ParallelProbe:
    """Base of the Parallel-API probes: every agent observes ``obs_space`` and acts in ``act_space``."""

    render_mode = None

    def __init__(self, possible_agents: list[str], obs_space: spaces.Space, act_space: spaces.Space):
        self.possible_agents = possible_agents
        self.agents: list[str] = []
        self._obs_space, self._act_space = obs_space, act_space

    @property
    def unwrapped(self) -> Any:
        return self

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space
