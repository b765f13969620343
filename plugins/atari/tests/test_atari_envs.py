"""The atari/<game> envs on the real ale-py: make, reset, step, preprocessing, lives, seeding."""

from __future__ import annotations

import numpy as np
import pytest
from ale_py.env import AtariEnv
from puffer_plugin_atari.envs import check_ale_py_version
from puffer_plugin_atari.wrappers import AtariEpisodeStats, FrameStack

from puffer_core import make_raw
from puffer_core.errors import MissingDependencyError

STATS_KEYS = {"lives_lost", "start_lives"}


def play(env, seed: int, actions, limit: int = 20_000):
    """Reset with ``seed`` and play ``actions`` (cycled) until the episode ends."""
    obs, _ = env.reset(seed=seed)
    lost = 0
    for step in range(1, limit + 1):
        obs, reward, terminated, truncated, info = env.step(actions[step % len(actions)])
        lost += bool(info.get("life_lost"))
        if terminated or truncated:
            return obs, terminated, truncated, info, step, lost
    raise AssertionError(f"episode did not end within {limit} steps")


def test_default_is_the_standard_training_preprocessing():
    env = make_raw("atari/breakout")
    assert isinstance(env, AtariEpisodeStats)
    assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
    ale_env = env.unwrapped
    assert isinstance(ale_env, AtariEnv)
    assert ale_env._frameskip == 1  # the preprocessing skips frames (and max-pools the last two)
    assert ale_env.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)  # sticky actions, as v5
    assert ale_env.ale.getInt("max_num_frames_per_episode") == 108_000
    obs, info = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and np.array_equal(obs[0], obs[3])  # the first frame fills the stack
    start = info["episode_frame_number"]
    assert 1 <= start <= 30  # 1 to noop_max no-op frames ran after the reset
    obs2, reward, terminated, truncated, info = env.step(1)
    assert np.array_equal(obs2[:3], obs[1:])  # the stack shifts by one frame per step
    assert info["episode_frame_number"] == start + 4  # frameskip 4
    env.close()


def test_raw_frames_are_exactly_ale_v5():
    env = make_raw("atari/breakout", preprocess=False)
    ref = AtariEnv(
        "breakout",
        frameskip=4,
        repeat_action_probability=0.25,
        full_action_space=False,
        max_num_frames_per_episode=108_000,
    )
    assert env.observation_space == ref.observation_space
    assert env.action_space == ref.action_space
    obs, _ = env.reset(seed=5)
    ref_obs, _ = ref.reset(seed=5)
    assert obs.shape == (210, 160, 3) and np.array_equal(obs, ref_obs)
    for action in [1, 2, 3, 2, 0, 1] * 5:
        obs, reward, *_ = env.step(action)
        ref_obs, ref_reward, *_ = ref.step(action)
        assert np.array_equal(obs, ref_obs) and reward == ref_reward
    env.close()
    ref.close()


def test_preprocessing_knobs():
    env = make_raw("atari/pong", frame_stack=1, screen_size=64, noop_max=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (64, 64) and not isinstance(env.env, FrameStack)
    env.close()
    env = make_raw("atari/pong", grayscale=False, frame_stack=2)
    assert env.observation_space.shape == (2, 84, 84, 3)
    env.close()
    env = make_raw("atari/space_invaders", preprocess=False, obs_type="ram", full_action_space=True)
    assert env.observation_space.shape == (128,) and env.action_space.n == 18
    env.close()
    with pytest.raises(ValueError, match="preprocess=False"):
        make_raw("atari/pong", frameskip=(2, 5))
    with pytest.raises(ValueError, match="obs_type"):
        make_raw("atari/pong", obs_type="ram")


def test_episode_is_the_whole_game_with_lives_in_the_stats():
    env = make_raw("atari/breakout")
    # FIRE then wander: the ball is lost five times and the game ends.
    obs, terminated, truncated, info, steps, lost = play(env, 3, [1, 2, 2, 3, 3, 0])
    assert terminated and not truncated
    stats = info["episode_stats"]
    assert set(stats) == STATS_KEYS
    assert stats["start_lives"] == 5 and info["lives"] == 0
    assert stats["lives_lost"] == 5 == lost  # every lost life was marked on its own step
    assert info["episode_frame_number"] >= 4 * steps
    env.close()


def test_short_episode_is_a_truncation_with_lives_left():
    env = make_raw("atari/breakout", max_num_frames_per_episode=400)
    obs, terminated, truncated, info, steps, lost = play(env, 1, [0])
    assert truncated and not terminated
    assert info["lives"] == info["episode_stats"]["start_lives"] - lost
    env.close()


def trajectory(seed: int, **kwargs) -> tuple[np.ndarray, float]:
    env = make_raw("atari/breakout", **kwargs)
    obs, _ = env.reset(seed=seed)
    frames, total = [obs.copy()], 0.0
    for i in range(150):
        obs, reward, terminated, truncated, _ = env.step([1, 2, 3, 0][i % 4])
        frames.append(obs.copy())
        total += reward
        if terminated or truncated:
            break
    env.close()
    return np.stack(frames), total


@pytest.mark.parametrize("preprocess", [True, False])
def test_determinism_by_seed(preprocess):
    a, ra = trajectory(11, preprocess=preprocess)
    b, rb = trajectory(11, preprocess=preprocess)
    c, _ = trajectory(12, preprocess=preprocess)
    assert a.shape == b.shape and np.array_equal(a, b) and ra == rb
    assert a.shape != c.shape or not np.array_equal(a, c)


def test_games_without_noop_get_no_noop_starts():
    def start_frames(**kwargs):
        env = make_raw("atari/backgammon", **kwargs)
        frames = {env.reset(seed=seed)[1]["episode_frame_number"] for seed in range(6)}
        env.step(0)
        env.close()
        return frames

    assert len(start_frames()) == 1  # no random no-op count: every reset starts alike
    assert len(start_frames(full_action_space=True)) > 1  # action 0 is NOOP again: random no-ops


def test_every_listed_game_is_known_to_ale():
    from ale_py import roms
    from puffer_plugin_atari.games import game_ids

    assert set(game_ids()) <= set(roms.get_all_rom_ids())


@pytest.mark.parametrize("game", ["montezuma_revenge", "space_invaders", "ms_pacman", "tic_tac_toe_3d"])
def test_snake_case_games_make(game):
    env = make_raw(f"atari/{game}", preprocess=False)
    obs, _ = env.reset(seed=0)
    env.step(0)
    assert obs.shape == (210, 160, 3)
    env.close()


def test_too_old_ale_py_is_refused_clearly():
    check_ale_py_version("0.9.0")
    check_ale_py_version("0.12.1")
    check_ale_py_version(None)
    with pytest.raises(MissingDependencyError, match=r"ale-py >= 0.9.*found ale-py 0.8.1"):
        check_ale_py_version("0.8.1")
