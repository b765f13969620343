"""Episode statistics: infos stay empty on ordinary steps and carry a small flat dict of
numbers when an episode ends.

That is what keeps multiprocessing traffic low: a worker only sends an info when it is
non-empty, so an env whose raw infos are large (NetHack's, Atari's) costs nothing until
the episode ends. At the end the info is::

    {**numeric scalars of the env's final info, **numeric scalars of info["episode_stats"],
     "episode_return": float, "episode_length": int}

``info["episode_stats"]`` is where plugin wrappers put env-specific statistics (NetHack
score, Atari lives…). ``episode_return`` and ``episode_length`` are always the ones
counted here, whatever the env reports under those names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
import numpy as np

from puffer_core.plugins.apis import to_parallel

__all__ = [
    "EPISODE_LENGTH",
    "EPISODE_RETURN",
    "NOT_STATISTICS",
    "EpisodeStats",
    "MultiAgentEpisodeStats",
    "episode_info",
    "kept_entries",
    "numeric_scalars",
]

#: The keys of every finished episode's info: counted here, whatever the env reports under them.
EPISODE_RETURN = "episode_return"
EPISODE_LENGTH = "episode_length"
#: Info keys that say where an episode ran, not how it went: never averaged as statistics.
NOT_STATISTICS = frozenset({"env_id", "agent", "agent_id", "worker"})


def _as_number(value: Any) -> Any:
    """A plain Python bool/int/float for a numeric scalar, else None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, int):  # also IntEnum (NetHack's end_status)
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf":
        return value.item()
    return None


def numeric_scalars(info: Any) -> dict:
    """The numeric scalar entries of ``info`` (plus those of ``info["episode_stats"]``)."""
    # A plain dict skips the Mapping ABC check, and an absent "episode_stats" skips its
    # second one: each costs a few hundred ns, paid at every episode end of a short-episode env.
    if type(info) is not dict and not isinstance(info, Mapping):
        return {}
    out = {}
    for key, value in info.items():
        number = _as_number(value)
        if number is not None:
            out[key] = number
    extra = info.get("episode_stats")
    if extra is not None and isinstance(extra, Mapping):
        for key, value in extra.items():
            number = _as_number(value)
            if number is not None:
                out[key] = number
    return out


def kept_entries(info: Any, keys: tuple[str, ...]) -> dict:
    """The entries of ``info`` named in ``keys`` (usually none: then ``{}``)."""
    if not keys or not isinstance(info, Mapping):
        return {}
    return {key: info[key] for key in keys if key in info}


def episode_info(info: Any, episode_return: Any, episode_length: int) -> dict:
    """The info reported on the step an episode ends."""
    out = numeric_scalars(info)
    out[EPISODE_RETURN] = float(episode_return)
    out[EPISODE_LENGTH] = episode_length
    return out


def _episode_counter(
    keep_keys: tuple[str, ...], episode_return: float = 0.0, episode_length: int = 0
) -> tuple[Callable[[Any, Any, Any, Any], dict], Callable[[], None], Callable[[], tuple[float, int]]]:
    """The bookkeeping of ``EpisodeStats``: ``(record, restart, totals)``, closures over two
    counters. ``record(reward, terminated, truncated, info)`` counts a step and returns the
    info to report. Closures because the emulator's compiled step calls ``record`` on every
    step: reading and writing their cells costs less than an object's attributes."""

    def record(reward: Any, terminated: Any, truncated: Any, info: Any) -> dict:
        nonlocal episode_return, episode_length
        episode_return += reward
        episode_length += 1
        if terminated or truncated:
            return episode_info(info, episode_return, episode_length)
        if keep_keys:
            return kept_entries(info, keep_keys)
        return {}

    def restart() -> None:
        nonlocal episode_return, episode_length
        episode_return, episode_length = 0.0, 0

    def totals() -> tuple[float, int]:
        return episode_return, episode_length

    return record, restart, totals


class EpisodeStats(gymnasium.Wrapper):
    """Counts return and length; infos are ``{}`` except on the step an episode ends.

    ``GymnasiumEmulator`` recognises an ``EpisodeStats`` directly beneath it and calls its
    ``record_step`` from its own compiled step, after the env's own ``step``: the same
    bookkeeping without this wrapper's Python frame. Subclasses that override ``step`` are
    stepped as any other env.
    """

    def __init__(self, env: gymnasium.Env, keep_keys: tuple[str, ...] = ()):
        super().__init__(env)
        self._env_step = env.step  # bound once: the hot path skips the attribute walk
        #: Info keys passed through on resets and ordinary steps when present (rare events
        #: such as Atari's ``life_lost``, or an action mask); everything else is dropped until
        #: the episode ends.
        self.keep_keys = tuple(keep_keys)
        self._counting()

    def _counting(self, episode_return: float = 0.0, episode_length: int = 0) -> None:
        #: ``record_step(reward, terminated, truncated, info)``: count one step of the env
        #: beneath; returns the info to report.
        self.record_step, self._restart, self._totals = _episode_counter(self.keep_keys, episode_return, episode_length)

    @property
    def episode_return(self) -> float:
        return self._totals()[0]

    @property
    def episode_length(self) -> int:
        return self._totals()[1]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._restart()
        # The kept keys too: an action mask that every step passes on must be there for the first step.
        return obs, kept_entries(info, self.keep_keys)

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict]:
        obs, reward, terminated, truncated, info = self._env_step(action)
        return obs, reward, terminated, truncated, self.record_step(reward, terminated, truncated, info)

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("record_step", "_restart", "_totals")}
        state["_counts"] = self._totals()  # closures do not pickle: their counts do
        return state

    def __setstate__(self, state: dict) -> None:
        counts = state.pop("_counts")
        self.__dict__.update(state)
        self._counting(*counts)


class MultiAgentEpisodeStats:
    """Per-agent ``EpisodeStats`` for a PettingZoo Parallel env (AEC envs are converted).

    An agent's return and length count the steps it has a reward entry for; its stats land
    in its own info on the step it terminates or is truncated. Every other info is ``{}``.
    """

    def __init__(self, env: Any):
        env = to_parallel(env)
        self.env = env
        self._env_step = env.step
        self._returns: dict = {}
        self._lengths: dict = {}

    # The Parallel API, forwarded.
    @property
    def possible_agents(self) -> list:
        return self.env.possible_agents

    @property
    def agents(self) -> list:
        return self.env.agents

    @property
    def num_agents(self) -> int:
        return len(self.env.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.env.possible_agents)

    @property
    def metadata(self) -> dict:
        return getattr(self.env, "metadata", {})

    @property
    def render_mode(self) -> Any:
        return getattr(self.env, "render_mode", None)

    @property
    def unwrapped(self) -> Any:
        return getattr(self.env, "unwrapped", self.env)

    def observation_space(self, agent: Any) -> Any:
        return self.env.observation_space(agent)

    def action_space(self, agent: Any) -> Any:
        return self.env.action_space(agent)

    def state(self) -> Any:
        return self.env.state()

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (during unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, _ = self.env.reset(seed=seed, options=options)
        self._returns = {}
        self._lengths = {}
        return obs, {agent: {} for agent in obs}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terminations, truncations, infos = self._env_step(actions)
        returns, lengths = self._returns, self._lengths
        for agent, reward in rewards.items():
            returns[agent] = returns.get(agent, 0.0) + reward
            lengths[agent] = lengths.get(agent, 0) + 1
        out = {agent: {} for agent in obs}
        for flags in (terminations, truncations):
            for agent, flag in flags.items():
                if flag and agent in returns:
                    out[agent] = episode_info(infos.get(agent), returns.pop(agent), lengths.pop(agent))
        return obs, rewards, terminations, truncations, out
