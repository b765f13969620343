"""Compatibility adapters, registered as built-in plugins on the ``puffer_adapt`` hook.

Each adapter looks at the raw env a creator returned and either converts it to the
Gymnasium API / PettingZoo Parallel API or returns None so the next adapter can try.

``GymAdapter`` (plugin ``gym``)
    converts: gym 0.26 envs (5-tuple step, ``reset(seed=)``) through shimmy's
    ``GymV26CompatibilityV0``; gym 0.21–0.25 style envs (4-tuple ``step``, ``seed()``,
    ``reset()`` returning only the observation), gym package or not, through
    ``LegacyGymEnv``: ``done`` is split into ``terminated`` / ``truncated`` using
    ``info["TimeLimit.truncated"]``, ``reset(seed=s)`` calls ``env.seed(s)`` first, and
    gym spaces become the equivalent gymnasium spaces.
    cannot: recover a truncation an old env did not mark in its info (it reads as
    termination); seed envs that have neither ``seed()`` nor ``reset(seed=)``;
    render modes chosen after construction.

``LegacyPettingZooAdapter`` (plugin ``pettingzoo-legacy``)
    converts: PettingZoo Parallel envs of the pre-1.23 API (gym spaces, 4-tuple ``step``
    with one ``dones`` dict before 1.22, ``reset`` without infos before 1.23) to the
    current Parallel API, and
    modern AEC envs to Parallel through PettingZoo's own ``aec_to_parallel`` (or
    ``turn_based_aec_to_parallel`` for turn-based games, which are not parallelizable).
    cannot: old (pre-1.22) AEC envs — convert those with their own package's
    ``to_parallel`` in the creator; per-agent truncation in old envs (read as termination
    unless the agent's info carries ``TimeLimit.truncated``).
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces as gspaces

from puffer_core.errors import SpaceError
from puffer_core.plugins.apis import is_multiagent
from puffer_core.specs.hooks import hookimpl

__all__ = ["GymAdapter", "LegacyGymEnv", "LegacyParallelEnv", "LegacyPettingZooAdapter", "to_gymnasium_space"]


def to_gymnasium_space(space: Any, path: str = "space") -> gspaces.Space:
    """Convert a gym (or gymnasium) space tree to gymnasium spaces, by duck type."""
    if isinstance(space, gspaces.Space):
        return space
    kind = type(space).__name__
    if kind == "Box":
        return gspaces.Box(low=np.asarray(space.low), high=np.asarray(space.high), dtype=space.dtype)
    if kind == "Discrete":
        return gspaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return gspaces.MultiDiscrete(np.asarray(space.nvec), dtype=space.dtype)
    if kind == "MultiBinary":
        return gspaces.MultiBinary(space.n)
    if kind == "Dict":
        return gspaces.Dict({k: to_gymnasium_space(v, f"{path}[{k!r}]") for k, v in space.spaces.items()})
    if kind == "Tuple":
        return gspaces.Tuple([to_gymnasium_space(v, f"{path}[{i}]") for i, v in enumerate(space.spaces)])
    raise SpaceError(f"{path}: cannot convert {type(space).__module__}.{kind} to a gymnasium space")


def _is_old_gym_api(env: Any) -> bool:
    """True for gym < 0.26 envs and duck-typed envs written against that API."""
    module = type(env).__module__
    gym = _loaded_gym()
    if gym is not None and isinstance(env, gym.Env):
        return _version_tuple(gym.__version__) < (0, 26)
    if not (callable(getattr(env, "step", None)) and callable(getattr(env, "reset", None))):
        return False
    if module.startswith("gymnasium"):
        return False
    try:
        params = inspect.signature(env.reset).parameters
    except (TypeError, ValueError):
        return False
    return "seed" not in params and callable(getattr(env, "seed", None))


def _loaded_gym() -> Any:
    import sys

    return sys.modules.get("gym")


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


class LegacyGymEnv(gymnasium.Env):
    """A gym 0.21–0.25 style env (4-tuple step, ``seed()``) behind the Gymnasium API."""

    def __init__(self, env: Any):
        self.env = env
        self.observation_space = to_gymnasium_space(env.observation_space, "observation_space")
        self.action_space = to_gymnasium_space(env.action_space, "action_space")
        self.metadata = dict(getattr(env, "metadata", {}) or {})
        self.render_mode = getattr(env, "render_mode", None)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None and callable(getattr(self.env, "seed", None)):
            self.env.seed(seed)
        result = self.env.reset()
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            return result  # some 0.25 envs already return (obs, info)
        return result, {}

    def step(self, action):
        result = self.env.step(action)
        if len(result) == 5:
            return result
        obs, reward, done, info = result
        truncated = bool(info.get("TimeLimit.truncated", False)) if done else False
        return obs, reward, bool(done) and not truncated, truncated, info

    def render(self):
        return self.env.render()

    def close(self):
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


class GymAdapter:
    """Built-in adapter plugin for gym-era single-agent envs."""

    @hookimpl
    def puffer_adapt(self, env: Any, spec: Any) -> Any:
        if isinstance(env, gymnasium.Env) or is_multiagent(env):
            return None
        gym = _loaded_gym()
        if gym is not None and isinstance(env, gym.Env) and _version_tuple(gym.__version__) >= (0, 26):
            from shimmy.openai_gym_compatibility import GymV26CompatibilityV0

            return GymV26CompatibilityV0(env=env)
        if _is_old_gym_api(env):
            return LegacyGymEnv(env)
        return None


def _old_pettingzoo() -> bool:
    """True when the installed pettingzoo predates the reset-returns-infos API (1.23)."""
    try:
        import pettingzoo
    except ImportError:
        return False
    return _version_tuple(pettingzoo.__version__) < (1, 23)


def _is_legacy_parallel(env: Any) -> bool:
    """Pre-1.23 PettingZoo Parallel envs: gym spaces or an old pettingzoo package."""
    if not hasattr(env, "possible_agents") or hasattr(env, "agent_iter"):
        return False
    try:
        space = LegacyParallelEnv._space(env, "observation", env.possible_agents[0])
    except (AttributeError, KeyError, IndexError, TypeError):
        return False
    return not isinstance(space, gspaces.Space) or _old_pettingzoo()


class LegacyParallelEnv:
    """An old PettingZoo Parallel env behind the current Parallel API."""

    def __init__(self, env: Any):
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.metadata = dict(getattr(env, "metadata", {}) or {})
        self.render_mode = getattr(env, "render_mode", None)
        self._obs_spaces = {
            a: to_gymnasium_space(self._space(env, "observation", a), f"obs[{a!r}]") for a in self.possible_agents
        }
        self._act_spaces = {
            a: to_gymnasium_space(self._space(env, "action", a), f"action[{a!r}]") for a in self.possible_agents
        }

    @staticmethod
    def _space(env: Any, kind: str, agent: str) -> Any:
        method = getattr(env, f"{kind}_space", None)
        if callable(method):
            return method(agent)
        return getattr(env, f"{kind}_spaces")[agent]

    @property
    def agents(self) -> list[str]:
        return list(self.env.agents)

    def observation_space(self, agent: str) -> gspaces.Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> gspaces.Space:
        return self._act_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is None:
            result = self.env.reset()
        else:
            try:
                result = self.env.reset(seed=seed)
            except TypeError:  # before reset(seed=): seed() then reset()
                self.env.seed(seed)
                result = self.env.reset()
        if isinstance(result, tuple) and len(result) == 2:
            return result
        return result, {agent: {} for agent in result}

    def step(self, actions: dict):
        result = self.env.step(actions)
        if len(result) == 5:
            return result
        obs, rewards, dones, infos = result
        truncations = {
            a: bool(done and infos.get(a, {}).get("TimeLimit.truncated", False)) for a, done in dones.items()
        }
        terminations = {a: bool(done) and not truncations[a] for a, done in dones.items()}
        return obs, rewards, terminations, truncations, infos

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()


class LegacyPettingZooAdapter:
    """Built-in adapter plugin for old PettingZoo envs and AEC → Parallel conversion."""

    @hookimpl
    def puffer_adapt(self, env: Any, spec: Any) -> Any:
        if not hasattr(env, "possible_agents"):
            return None
        if hasattr(env, "agent_iter"):
            from pettingzoo.utils.conversions import aec_to_parallel, turn_based_aec_to_parallel

            # Turn-based games (chess, connect four) are not parallelizable: every agent gets
            # an action each step and only the agent whose turn it is acts.
            if (getattr(env, "metadata", None) or {}).get("is_parallelizable", False):
                parallel = aec_to_parallel(env)
            else:
                parallel = turn_based_aec_to_parallel(env)
            return LegacyParallelEnv(parallel) if _old_pettingzoo() else parallel
        if _is_legacy_parallel(env):
            return LegacyParallelEnv(env)
        return None
