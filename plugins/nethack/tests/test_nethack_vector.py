"""nethack envs through the whole core: emulation round trip, Multiprocessing, `puffer run`."""

from __future__ import annotations

import json

import nle  # noqa: F401  (a dependency: a broken install must fail, not skip)
import numpy as np

import puffer_core
from puffer_core import make_raw, vector
from puffer_core.testing import run_puffer


def test_emulation_round_trip_matches_the_raw_observation():
    env = puffer_core.make("nethack/score", observation_keys=("glyphs", "blstats", "message", "inv_strs"))
    raw = make_raw("nethack/score", observation_keys=("glyphs", "blstats", "message", "inv_strs"))
    flat, info = env.reset(seed=21)
    expected, _ = raw.reset(seed=21)
    assert info == {}
    for step in range(5):
        nested = env.unflatten_observation(flat)
        assert set(nested) == set(expected)
        for key, value in expected.items():
            assert np.array_equal(nested[key], value), (step, key)
            assert nested[key].dtype == value.dtype
        flat, *_ = env.step(step + 1)
        expected, *_ = raw.step(step + 1)
    env.close()
    raw.close()


def test_emulated_episode_end_carries_the_nethack_stats():
    env = puffer_core.make("nethack/score", max_episode_steps=25)
    env.reset(seed=2)
    for _ in range(25):
        _obs, _r, terminated, truncated, info = env.step(0)
        if terminated or truncated:
            break
    assert truncated and not terminated
    assert {"score", "depth", "experience_level", "turns", "died", "end_code"} <= set(info)
    assert info["episode_length"] == 25
    env.close()


def test_two_worker_multiprocessing_run():
    with vector.make(
        "nethack/score", num_envs=4, num_workers=2, backend="multiprocessing", seed=7, max_episode_steps=30
    ) as envs:
        obs, _infos = envs.reset(seed=7)
        assert obs.shape == (4, *envs.single_observation_space.shape)
        first = obs.copy()
        assert not np.array_equal(first[0], first[1])  # seeds 7 and 8: different games
        episodes = []
        for _ in range(70):
            actions = np.zeros(envs.num_envs, dtype=np.int64)
            obs, rewards, terminals, truncations, infos = envs.step(actions)
            episodes += [info for info in infos if "episode_length" in info]
        assert len(episodes) >= 4
        assert all(info["episode_length"] == 30 and "score" in info and "end_code" in info for info in episodes)

    # Same seed, same first observations, in a fresh set of workers.
    with vector.make("nethack/score", num_envs=4, num_workers=2, backend="multiprocessing", seed=7) as envs:
        again, _ = envs.reset(seed=7)
        assert np.array_equal(first, again)


def test_puffer_run_nethack_score():
    result = run_puffer("run", "nethack/score", "--steps", "200", "--json", "--kwarg", "max_episode_steps=50")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["steps"] >= 200
    assert report["episodes"] >= 3
    assert {"score", "depth", "turns", "episode_return"} <= set(report["episode_means"])


def test_puffer_run_nethack_score_plain():
    result = run_puffer("run", "nethack/score", "--steps", "200")
    assert result.returncode == 0, result.stderr
    assert "steps/s" in result.stdout
