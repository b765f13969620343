"""atari envs through the whole core: emulation round trip, Multiprocessing, `puffer run`."""

from __future__ import annotations

import json

import ale_py  # noqa: F401  (a dependency: a broken install must fail, not skip)
import numpy as np
import pytest

import puffer_core
from puffer_core import make_raw, vector
from puffer_core.testing import run_puffer


@pytest.mark.parametrize("kwargs", [{}, {"preprocess": False}])
def test_emulation_round_trip_matches_the_raw_observation(kwargs):
    env = puffer_core.make("atari/breakout", **kwargs)
    raw = make_raw("atari/breakout", **kwargs)
    flat, info = env.reset(seed=4)
    expected, _ = raw.reset(seed=4)
    assert info == {}
    for step in range(6):
        nested = env.unflatten_observation(flat)
        assert nested.shape == expected.shape and nested.dtype == expected.dtype
        assert np.array_equal(nested, expected), step
        flat, *_ = env.step(step % 4)
        expected, *_ = raw.step(step % 4)
    env.close()
    raw.close()


def test_emulated_episode_end_carries_the_lives_stats():
    env = puffer_core.make("atari/breakout", max_num_frames_per_episode=200)
    env.reset(seed=0)
    for _ in range(100):
        _obs, _r, terminated, truncated, info = env.step(1)
        if terminated or truncated:
            break
    assert truncated
    expected = {"lives_lost", "start_lives", "lives", "episode_frame_number", "episode_return", "episode_length"}
    assert expected <= set(info)


def test_life_lost_reaches_users_through_make():
    env = puffer_core.make("atari/breakout")
    env.reset(seed=3)
    infos, actions = [], [1, 2, 2, 3, 3, 0]  # FIRE, then wander: the ball is lost five times
    for step in range(1, 5000):
        _obs, _r, terminated, truncated, info = env.step(actions[step % len(actions)])
        if terminated or truncated:
            break
        infos.append(info)
    assert terminated
    lost = [i for i, info in enumerate(infos) if info]
    assert lost and all(infos[i] == {"life_lost": True} for i in lost)  # on the steps a life is lost
    assert len(lost) < len(infos) // 10  # every other step carries {}
    assert info["lives_lost"] == 5 == len(lost) + info.get("life_lost", 0)  # the last one ends the game
    env.close()


def test_life_lost_reaches_users_of_a_vector_env():
    with vector.make("atari/breakout", num_envs=2, backend="serial", seed=0) as envs:
        envs.reset(seed=0)
        lost = []
        for _ in range(300):
            *_, infos = envs.step(np.ones(envs.num_envs, dtype=np.int64))
            lost += [info for info in infos if info.get("life_lost")]
            if len({info["env_id"] for info in lost}) == 2:
                break
        assert {info["env_id"] for info in lost} == {0, 1}
        assert all(set(info) <= {"life_lost", "env_id"} for info in lost if "episode_length" not in info)


def test_two_worker_multiprocessing_run():
    with vector.make(
        "atari/breakout",
        num_envs=4,
        num_workers=2,
        backend="multiprocessing",
        seed=3,
        max_num_frames_per_episode=240,
    ) as envs:
        obs, _ = envs.reset(seed=3)
        assert obs.shape == (4, 4 * 84 * 84)
        first = obs.copy()
        episodes = []
        for _ in range(80):
            obs, rewards, terminals, truncations, infos = envs.step(np.ones(envs.num_envs, dtype=np.int64))
            episodes += [info for info in infos if "episode_length" in info]
        assert len(episodes) >= 4
        assert all("lives_lost" in info for info in episodes)
    with vector.make("atari/breakout", num_envs=4, num_workers=2, backend="multiprocessing", seed=3) as envs:
        again, _ = envs.reset(seed=3)
        assert np.array_equal(first, again)


def test_puffer_run_atari_breakout():
    result = run_puffer("run", "atari/breakout", "--steps", "200", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["steps"] >= 200


def test_puffer_run_atari_breakout_plain():
    result = run_puffer("run", "atari/breakout", "--steps", "200")
    assert result.returncode == 0, result.stderr
    assert "steps/s" in result.stdout
