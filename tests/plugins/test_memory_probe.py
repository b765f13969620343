"""The memory probe (``classic/probe_memory``, ``classic/probe_memory_2agents``): its dynamics
as the task states them, that its observations hide the cue at the query (so a policy without
memory is at chance), its agent masks, and the API checkers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from pettingzoo.test import parallel_api_test

import puffer_core
from puffer_core import vector
from puffer_core.errors import APIUsageError
from puffer_core.testing import check_env as puffer_check_env, envs_json

IDS = ["classic/probe_memory", "classic/probe_memory_2agents"]


def play(env, seed, action):
    """(observations before each step, rewards, terminated flags, final observation) of one episode."""
    observation, _ = env.reset(seed=seed)
    observations, rewards, flags = [], [], []
    terminated = False
    while not terminated:
        observations.append(observation.tolist())
        observation, reward, terminated, truncated, _ = env.step(action)
        assert not truncated
        rewards.append(reward)
        flags.append(terminated)
    return observations, rewards, flags, observation.tolist()


@pytest.mark.parametrize("blank_steps", [0, 1, 4])
def test_a_cue_then_blanks_then_the_query(blank_steps):
    env = puffer_core.make("classic/probe_memory", blank_steps=blank_steps).unwrapped
    cues = set()
    for seed in range(12):
        for action in (0, 1):
            observations, rewards, flags, final = play(env, seed, action)
            cue = observations[0][0]
            cues.add(cue)
            assert observations == [[cue, 0.0]] + [[0.0, 0.0]] * blank_steps + [[0.0, 1.0]]
            right = 1.0 if action == int(cue > 0) else -1.0
            assert rewards == [0.0] * (blank_steps + 1) + [right]
            assert flags == [False] * (blank_steps + 1) + [True]
            assert final == [0.0, 1.0]  # the observation an episode ends on repeats the query
    assert cues == {-1.0, 1.0}
    with pytest.raises(APIUsageError, match="episode is over"):
        env.step(0)


def test_the_query_looks_the_same_whatever_the_cue():
    """What makes a feed-forward policy guess: the query observation is the same for both cues."""
    env = puffer_core.make("classic/probe_memory")
    queries = {}
    for seed in range(12):
        flat, _ = env.reset(seed=seed)
        cue = float(flat[0])
        for _ in range(5):
            flat, *_ = env.step(0)
        queries.setdefault(cue, set()).add(tuple(flat.tolist()))
    assert queries == {-1.0: {(0.0, 1.0)}, 1.0: {(0.0, 1.0)}}


def test_bad_kwargs_and_actions_are_refused():
    with pytest.raises(APIUsageError, match="blank_steps must be an int"):
        puffer_core.make("classic/probe_memory", blank_steps=-1)
    env = puffer_core.make("classic/probe_memory").unwrapped
    env.reset(seed=0)
    with pytest.raises(APIUsageError, match=r"not in Discrete\(2\)"):
        env.step(2)
    with pytest.raises(APIUsageError, match="call reset"):
        puffer_core.make("classic/probe_memory").unwrapped.step(0)


def test_two_agents_have_their_own_cues_and_agent_1_leaves_first():
    env = puffer_core.make("classic/probe_memory_2agents", blank_steps=2).unwrapped
    differ = False
    for seed in range(12):
        observations, _ = env.reset(seed=seed)
        cues = {agent: float(observation[0]) for agent, observation in observations.items()}
        differ |= cues["agent_0"] != cues["agent_1"]
        actions = {agent: int(cue > 0) for agent, cue in cues.items()}
        rewards_by_step = []
        while env.agents:
            observations, rewards, terminations, truncations, _ = env.step({a: actions[a] for a in env.agents})
            rewards_by_step.append(rewards)
            assert not any(truncations.values())
        assert rewards_by_step == [
            {"agent_0": 0.0, "agent_1": 0.0},
            {"agent_0": 0.0, "agent_1": 0.0},
            {"agent_0": 0.0, "agent_1": 1.0},  # one blank step fewer: agent_1's query comes first
            {"agent_0": 1.0},
        ]
    assert differ


def test_agent_1s_row_is_masked_after_it_leaves():
    with vector.make("classic/probe_memory_2agents", num_envs=2, seed=0, blank_steps=1) as envs:
        envs.reset()
        masks = []
        for _ in range(5):
            envs.send(np.zeros(envs.num_envs, np.int64))
            *_, mask = envs.recv()
            masks.append(mask.tolist())
    # steps: cue, blank/query (agent_1 leaves), query (agent_0 leaves, agent_1 masked), reset, …
    assert masks[:4] == [[True] * 4, [True] * 4, [True, False] * 2, [True] * 4]


@pytest.mark.parametrize("env_id", IDS)
def test_the_checkers_pass(env_id):
    report = puffer_check_env(env_id, steps=16)
    assert report.passed, report.summary()
    env = puffer_core.make(env_id)
    with warnings.catch_warnings():
        if env_id.endswith("_2agents"):
            warnings.simplefilter("error")  # pettingzoo's complaints are warnings
            parallel_api_test(env.unwrapped, num_cycles=50)
        else:
            warnings.filterwarnings("ignore", message=".*render")
            gymnasium_check_env(env.unwrapped)


def test_puffer_envs_lists_both():
    listed = {env["id"]: env for env in envs_json("--plugin", "classic")["envs"]}
    assert listed["classic/probe_memory"]["api"] == "gymnasium"
    assert listed["classic/probe_memory_2agents"]["api"] == "pettingzoo"
    assert "needs policy=lstm" in listed["classic/probe_memory"]["description"]
