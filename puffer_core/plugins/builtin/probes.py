"""Tiny pure-numpy probe environments, for tests, demos and debugging learners.

``ProbeDictEnv``, ``ProbeMixedActionEnv`` and ``ProbeMultiAgentEnv`` have awkward spaces;
``DebugProbeEnv`` and its ``Dict`` and two-agent variants are Andy Jones' five RL debugging
probes, with their expected values and actions as data (``probe_expectations``);
``MemoryProbeEnv`` and its two-agent variant (in ``memory_probe``) need a recurrent policy. Each env
is deterministic given its seed and cheap enough to step a million times.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffer_core.errors import APIUsageError
from puffer_core.plugins.builtin.memory_probe import MemoryProbeEnv, MemoryProbeTwoAgentEnv
from puffer_core.plugins.builtin.parallel_probe import ParallelProbe

__all__ = [
    "PROBE_TASKS",
    "PROBE_VARIANTS",
    "DebugProbeDictEnv",
    "DebugProbeEnv",
    "DebugProbeTwoAgentEnv",
    "MemoryProbeEnv",
    "MemoryProbeTwoAgentEnv",
    "ProbeCase",
    "ProbeDictEnv",
    "ProbeExpectations",
    "ProbeMixedActionEnv",
    "ProbeMultiAgentEnv",
    "ProbeTask",
    "parse_probe_id",
    "probe_expectations",
    "probe_task",
]


class ProbeDictEnv(gymnasium.Env):
    """Nested Dict/Tuple observation and Dict action; reward 1 when ``move`` hits the target."""

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 32):
        self.episode_length = int(episode_length)
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32),
                "inventory": spaces.Tuple(
                    (spaces.Discrete(5, start=1), spaces.MultiDiscrete([3, 4]), spaces.MultiBinary(3))
                ),
                "status": spaces.Dict(
                    {
                        "tick": spaces.Box(0, np.iinfo(np.int32).max, shape=(), dtype=np.int32),
                        "target": spaces.Discrete(4),
                    }
                ),
            }
        )
        self.action_space = spaces.Dict({"move": spaces.Discrete(4), "use": spaces.MultiDiscrete([2, 3])})
        self._tick = 0
        self._target = 0

    def _obs(self) -> dict[str, Any]:
        rng = self.np_random
        return {
            "position": rng.uniform(-1, 1, size=2).astype(np.float32),
            "inventory": (
                int(rng.integers(1, 6)),
                rng.integers(0, [3, 4]).astype(np.int64),
                rng.integers(0, 2, size=3).astype(np.int8),
            ),
            "status": {"tick": np.int32(self._tick), "target": self._target},
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._tick = 0
        self._target = int(self.np_random.integers(4))
        return self._obs(), {}

    def step(self, action):
        reward = 1.0 if int(action["move"]) == self._target else 0.0
        self._tick += 1
        self._target = int(self.np_random.integers(4))
        truncated = self._tick >= self.episode_length
        return self._obs(), reward, False, truncated, {}


class ProbeMixedActionEnv(gymnasium.Env):
    """Mixed discrete + continuous action (what PufferLib refuses); reward = -distance."""

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 16):
        self.episode_length = int(episode_length)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)))
        self._goal = np.zeros(3, dtype=np.float32)
        self._tick = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._tick = 0
        self._goal = self.np_random.uniform(-1, 1, size=3).astype(np.float32)
        return self._goal.copy(), {}

    def step(self, action):
        choice, vector = action
        guess = np.array([choice - 1, *np.asarray(vector, dtype=np.float32)], dtype=np.float32)
        reward = -float(np.abs(guess - self._goal).sum())
        self._tick += 1
        terminated = reward > -0.1
        self._goal = self.np_random.uniform(-1, 1, size=3).astype(np.float32)
        return self._goal.copy(), reward, terminated, self._tick >= self.episode_length, {}


class ProbeMultiAgentEnv(ParallelProbe):
    """A PettingZoo Parallel-API env where agent ``k`` leaves ``k`` steps before the end.

    Written against the Parallel API by duck typing, so the core needs no pettingzoo
    install to test multi-agent slots and masks. Reward: 1 when an agent echoes its bit.
    """

    metadata = {"render_modes": [], "name": "probe_multiagent", "is_parallelizable": True}

    def __init__(self, num_agents: int = 3, episode_length: int = 12):
        if num_agents < 1 or episode_length <= num_agents:
            raise ValueError("need num_agents >= 1 and episode_length > num_agents")
        observation = spaces.Dict(
            {"bit": spaces.Discrete(2), "clock": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)}
        )
        super().__init__([f"agent_{i}" for i in range(num_agents)], observation, spaces.Discrete(2))
        self.episode_length = int(episode_length)
        self._rng = np.random.default_rng()
        self._bits: dict[str, int] = {}
        self._tick = 0

    def _observe(self) -> dict[str, Any]:
        self._bits = {agent: int(self._rng.integers(2)) for agent in self.agents}
        clock = np.array([self._tick / self.episode_length], dtype=np.float32)
        return {agent: {"bit": bit, "clock": clock.copy()} for agent, bit in self._bits.items()}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._tick = 0
        return self._observe(), {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, Any]):
        self._tick += 1
        rewards = {a: float(int(actions.get(a, -1)) == self._bits[a]) for a in self.agents}
        remaining = self.episode_length - self._tick
        terminations = {a: int(a.rsplit("_", 1)[1]) >= remaining for a in self.agents}
        truncations = {a: False for a in self.agents}
        infos: dict[str, dict] = {a: {} for a in self.agents}
        obs = self._observe()
        self.agents = [a for a in self.agents if not terminations[a]]
        return obs, rewards, terminations, truncations, infos

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None


# ----------------------------------------------------------------------------- debugging probes
#
# Andy Jones' five probes ("Debugging RL, Without the Agonizing Pain"): each isolates one thing
# a learner must get right, so a failure points at it. Every probe is one agent's episode over
# observations in {-1, 0, 1}; the variants only change how that episode is presented.


def _zero(rng: np.random.Generator) -> tuple[float, ...]:
    return (0.0,)


def _random_sign(rng: np.random.Generator) -> tuple[float, ...]:
    return (float(2 * rng.integers(2) - 1),)


def _zero_then_one(rng: np.random.Generator) -> tuple[float, ...]:
    return (0.0, 1.0)


def _plus_one(observation: float, action: int, last: bool) -> float:
    return 1.0


def _the_observation(observation: float, action: int, last: bool) -> float:
    return observation


def _one_at_the_end(observation: float, action: int, last: bool) -> float:
    return 1.0 if last else 0.0


def _action_one_wins(observation: float, action: int, last: bool) -> float:
    return 1.0 if action == 1 else -1.0


def _matching_sign_wins(observation: float, action: int, last: bool) -> float:
    return 1.0 if action == int(observation > 0) else -1.0


@dataclass(frozen=True)
class ProbeCase:
    """A canonical observation of a probe: its value is ``reward * gamma ** delay``."""

    observation: float
    reward: float
    delay: int = 0  # steps between this observation and the reward
    best_action: int | None = None  # None: one action only


@dataclass(frozen=True)
class ProbeTask:
    """One agent's episode in a probe: what it observes and earns. Every variant plays it."""

    number: int
    num_actions: int
    script: Callable[[np.random.Generator], tuple[float, ...]]  # the observation before each step
    reward: Callable[[float, int, bool], float]  # (observation, action, last step?) -> reward
    cases: tuple[ProbeCase, ...]


PROBE_TASKS = {
    1: ProbeTask(1, 1, _zero, _plus_one, (ProbeCase(0.0, 1.0),)),
    2: ProbeTask(2, 1, _random_sign, _the_observation, (ProbeCase(-1.0, -1.0), ProbeCase(1.0, 1.0))),
    3: ProbeTask(3, 1, _zero_then_one, _one_at_the_end, (ProbeCase(0.0, 1.0, delay=1), ProbeCase(1.0, 1.0))),
    4: ProbeTask(4, 2, _zero, _action_one_wins, (ProbeCase(0.0, 1.0, best_action=1),)),
    5: ProbeTask(
        5,
        2,
        _random_sign,
        _matching_sign_wins,
        (ProbeCase(-1.0, 1.0, best_action=0), ProbeCase(1.0, 1.0, best_action=1)),
    ),
}


def probe_task(number: int) -> ProbeTask:
    try:
        return PROBE_TASKS[int(number)]
    except (KeyError, TypeError, ValueError):
        raise APIUsageError(f"there are debugging probes 1 to 5, not {number!r}") from None


class _AgentRun:
    """One agent's way through a probe's script of observations."""

    def __init__(self, task: ProbeTask, script: tuple[float, ...]):
        self.task = task
        self.script = script
        self.t = 0

    @property
    def observation(self) -> float:
        # The observation an episode ends on repeats its last one, so a learner that wrongly
        # learns from the step after the end (next-step autoreset) drags a canonical value.
        return self.script[min(self.t, len(self.script) - 1)]

    def act(self, action: Any) -> tuple[float, bool]:
        """The reward for ``action`` at the current step, and whether that step was the last."""
        if self.t >= len(self.script):
            raise APIUsageError(f"probe_{self.task.number}: the episode is over; call reset() first")
        action = int(action)
        if not 0 <= action < self.task.num_actions:
            raise APIUsageError(
                f"probe_{self.task.number}: action {action} is not in Discrete({self.task.num_actions})"
            )
        last = self.t == len(self.script) - 1
        reward = self.task.reward(self.script[self.t], action, last)
        self.t += 1
        return reward, last


def signal_space() -> spaces.Box:
    return spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)


def signal_observation(signal: float) -> np.ndarray:
    return np.array([signal], dtype=np.float32)


def nested_space() -> spaces.Dict:
    """The ``_dict`` variants' observation: the signal beside constant leaves of other dtypes."""
    context = spaces.Dict({"flag": spaces.Discrete(3), "bits": spaces.MultiBinary(2)})
    return spaces.Dict({"signal": signal_space(), "context": context})


def nested_observation(signal: float) -> dict[str, Any]:
    # Non-zero constants: a learner reading the wrong bytes sees them, not a harmless zero.
    context = {"flag": np.int64(2), "bits": np.array([1, 0], dtype=np.int8)}
    return {"signal": signal_observation(signal), "context": context}


class DebugProbeEnv(gymnasium.Env):
    """Andy Jones' debugging probe ``number`` (1-5, see ``PROBE_TASKS``); observation ``Box(-1, 1, (1,))``."""

    metadata = {"render_modes": []}
    observe = staticmethod(signal_observation)

    def __init__(self, number: int = 1):
        self.task = probe_task(number)
        self.observation_space = signal_space()
        self.action_space = spaces.Discrete(self.task.num_actions)
        self._run = _AgentRun(self.task, ())  # stepping before reset() says to reset

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._run = _AgentRun(self.task, self.task.script(self.np_random))
        return self.observe(self._run.observation), {}

    def step(self, action):
        reward, last = self._run.act(action)
        return self.observe(self._run.observation), reward, last, False, {}


class DebugProbeDictEnv(DebugProbeEnv):
    """Probe ``number`` with the signal at ``obs["signal"]`` of a nested Dict of mixed dtypes.

    Mixed dtypes make the emulator lay the observation out as uint8 bytes, so a learner
    passes these only if it unflattens (or views) the bytes correctly.
    """

    observe = staticmethod(nested_observation)

    def __init__(self, number: int = 1):
        super().__init__(number)
        self.observation_space = nested_space()


class DebugProbeTwoAgentEnv(ParallelProbe):
    """Probe ``number`` for two agents, staggered so that agent masks matter.

    PettingZoo Parallel API by duck typing (like ``ProbeMultiAgentEnv``). ``agent_1`` plays
    the probe's last step from the episode's first step; ``agent_0`` joins one step later
    (its observation comes with the first step's results) and plays the whole probe. So
    ``agent_0``'s row is masked and zeroed at reset, and in probe 3 ``agent_1``'s row is
    masked on step 2 while the episode runs on to step 3. Zeroed rows look like observation
    0: see ``probe_expectations`` for what a learner that uses them would get wrong.
    """

    metadata = {"render_modes": [], "name": "debug_probe_2agents", "is_parallelizable": True}
    observe = staticmethod(signal_observation)

    def __init__(self, number: int = 1):
        self.task = probe_task(number)
        self.metadata = {**self.metadata, "name": f"probe_{self.task.number}_2agents"}
        super().__init__(["agent_0", "agent_1"], signal_space(), spaces.Discrete(self.task.num_actions))
        self._rng = np.random.default_rng()
        self._runs: dict[str, _AgentRun] = {}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._runs = {"agent_1": _AgentRun(self.task, self.task.script(self._rng)[-1:])}
        self.agents = ["agent_1"]
        return {"agent_1": self.observe(self._runs["agent_1"].observation)}, {"agent_1": {}}

    def step(self, actions: dict[str, Any]):
        rewards, terminations = {}, {}
        for agent in self.agents:
            rewards[agent], terminations[agent] = self._runs[agent].act(actions[agent])
        if rewards and "agent_0" not in self._runs:  # joins with the first step's results
            self._runs["agent_0"] = _AgentRun(self.task, self.task.script(self._rng))
            rewards["agent_0"], terminations["agent_0"] = 0.0, False
        observations = {agent: self.observe(self._runs[agent].observation) for agent in rewards}
        self.agents = [agent for agent in self.possible_agents if agent in rewards and not terminations[agent]]
        return observations, rewards, terminations, dict.fromkeys(rewards, False), {agent: {} for agent in rewards}

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None


#: id suffix -> the class that presents a probe that way
PROBE_VARIANTS = {"": DebugProbeEnv, "_dict": DebugProbeDictEnv, "_2agents": DebugProbeTwoAgentEnv}

_PROBE_ID = re.compile(r"(?:classic/)?probe_([1-5])(_dict|_2agents)?")


def parse_probe_id(env_id: str) -> tuple[int, str]:
    """``"classic/probe_3_dict"`` -> ``(3, "_dict")``."""
    match = _PROBE_ID.fullmatch(env_id)
    if match is None:
        raise APIUsageError(
            f"{env_id!r} is not a debugging probe; those are classic/probe_1 ... classic/probe_5, "
            "each also with the suffix _dict or _2agents"
        )
    return int(match[1]), match[2] or ""


@dataclass(frozen=True)
class ProbeExpectations:
    """What a learner trained on a probe should output for its canonical observations, one row each.

    ``observations`` are raw, as the env returns them (nested dicts for ``_dict`` ids, one
    agent's observation for ``_2agents`` ids); ``agents[i]`` is whose observation row ``i`` is
    (``"agent_0"`` for single-agent ids); ``values`` are the true state values under ``gamma``;
    ``best_actions`` the greedy actions (probes 4 and 5; None for probes 1-3, which have one
    action). ``flat_observations(env)`` lays the rows out as the emulator does, for the networks.
    """

    env_id: str
    gamma: float
    observations: tuple[Any, ...]
    agents: tuple[str, ...]
    values: np.ndarray
    best_actions: np.ndarray | None

    def __len__(self) -> int:
        return len(self.observations)

    def flat_observations(self, env: Any) -> np.ndarray:
        """Rows ``(len(self), obs_size)`` as ``env`` (an emulator of this probe, such as
        ``puffer_core.make(env_id)``) lays its observations out."""
        return np.stack([env.flatten_observation(observation) for observation in self.observations])


def probe_expectations(env_id: str, gamma: float) -> ProbeExpectations:
    """The canonical observations of probe ``env_id`` (any variant) with their values under ``gamma``.

    Values: probe 1 V(0) = 1; probe 2 V(±1) = ±1; probe 3 V(0) = gamma, V(1) = 1; probe 4
    V(0) = 1, best action 1; probe 5 V(±1) = 1, best action 1 for +1 and 0 for -1.
    ``_2agents`` ids list ``agent_0``'s cases (the whole probe), then ``agent_1``'s (the
    probe's last step).

    What a wrong learner sees instead. One that learns from the step after an episode's end
    (next-step autoreset) sees the episode's last observation again, then reward 0 and the
    next episode: in probe 1 its targets for observation 0 average (1 + gamma) / 2. In the
    ``_2agents`` ids, one that learns from masked rows sees them as observation 0 followed
    by reward 0: with one critic for both agents, its targets for observation 0 average
    (2 + gamma) / 3 in probes 1 and 4 (so test these with a gamma well below 1, e.g. 0.5)
    and gamma * (1 + gamma) / 3 in probe 3, instead of 1 and gamma (one-step targets
    bootstrapped from the true values; the values it learns drop further). In probes 2 and
    5 observation 0 is not canonical: their ``_2agents`` ids catch the two agents' rows
    mixed up, not masks ignored.
    """
    if not 0.0 <= gamma <= 1.0:
        raise APIUsageError(f"gamma must be in [0, 1], got {gamma!r}")
    number, variant = parse_probe_id(env_id)
    task = PROBE_TASKS[number]
    rows = [("agent_0", case) for case in task.cases]
    if variant == "_2agents":
        rows += [("agent_1", case) for case in task.cases if case.delay == 0]
    observe = PROBE_VARIANTS[variant].observe
    best = [case.best_action for _, case in rows]
    return ProbeExpectations(
        env_id=env_id if env_id.startswith("classic/") else f"classic/{env_id}",
        gamma=float(gamma),
        observations=tuple(observe(case.observation) for _, case in rows),
        agents=tuple(agent for agent, _ in rows),
        values=np.array([case.reward * gamma**case.delay for _, case in rows], dtype=np.float64),
        best_actions=None if task.num_actions == 1 else np.array(best, dtype=np.int64),
    )
