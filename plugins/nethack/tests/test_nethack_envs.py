"""The nethack/<task> envs on the real nle: make, reset, step, episode ends, stats, seeding."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from nle import nethack
from nle.env import base as nle_base
from puffer_plugin_nethack import env_specs
from puffer_plugin_nethack.envs import DEFAULT_OBSERVATION_KEYS, TASKS, resolve_observation_keys
from puffer_plugin_nethack.wrappers import BL_DEPTH, BL_GOLD, BL_SCORE, BL_TIME, BL_XP, EndReason, NetHackWrapper

from puffer_core import make_raw
from puffer_core.errors import APIUsageError

STATS_KEYS = {"score", "depth", "experience_level", "turns", "gold", "died", "end_code", "end_reason"}


def run_episode(env, seed: int, actions: np.random.Generator, limit: int = 100_000):
    obs, _info = env.reset(seed=seed)
    for step in range(1, limit + 1):
        obs, reward, terminated, truncated, info = env.step(int(actions.integers(env.action_space.n)))
        if terminated or truncated:
            return obs, terminated, truncated, info, step
    raise AssertionError(f"episode did not end within {limit} steps")


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_makes_resets_and_steps(task):
    env = make_raw(f"nethack/{task}")
    try:
        assert isinstance(env, NetHackWrapper)
        assert set(env.observation_space.spaces) == set(DEFAULT_OBSERVATION_KEYS)
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        obs, reward, terminated, truncated, info = env.step(0)
        assert env.observation_space.contains(obs)
        assert isinstance(reward, float)
        assert not (terminated or truncated)
    finally:
        env.close()


def test_ids_cover_every_nle_task():
    ids = {spec.id for spec in env_specs()}
    assert ids == {
        "nethack/nethack",
        "nethack/score",
        "nethack/staircase",
        "nethack/pet",
        "nethack/oracle",
        "nethack/gold",
        "nethack/eat",
        "nethack/scout",
        "nethack/challenge",
    }


def test_episode_to_its_step_limit_is_a_truncation_with_stats():
    env = make_raw("nethack/score", max_episode_steps=50)
    obs, terminated, truncated, info, steps = run_episode(env, 3, np.random.default_rng(0))
    assert steps == 50
    assert truncated and not terminated  # nle 1.x reports both at the limit; we keep truncation only
    stats = info["episode_stats"]
    assert set(stats) == STATS_KEYS
    assert stats["end_reason"] == "truncated" and stats["end_code"] == EndReason.TRUNCATED
    assert stats["died"] == 0
    assert stats["depth"] >= 1 and stats["experience_level"] >= 1 and stats["turns"] >= 1
    env.close()


def test_death_stats_are_the_last_in_game_values():
    env = make_raw("nethack/nethack", max_episode_steps=20_000)
    actions = np.random.default_rng(1)
    for seed in range(10):
        obs, terminated, truncated, info, _steps = run_episode(env, seed, actions)
        if info["episode_stats"]["end_reason"] == "death":
            break
    else:
        pytest.fail("a random agent survived 10 games")
    stats = info["episode_stats"]
    assert terminated and not truncated
    assert stats["died"] == 1 and stats["end_code"] == EndReason.DEATH
    # NLE zeroes blstats once the game is over; the stats must not be those zeros.
    assert not obs["blstats"].any()
    assert stats["turns"] > 0 and stats["depth"] >= 1 and stats["experience_level"] >= 1
    env.close()


def test_blstats_indices_match_nle():
    assert (BL_SCORE, BL_DEPTH, BL_XP, BL_TIME, BL_GOLD) == (
        nethack.NLE_BL_SCORE,
        nethack.NLE_BL_DEPTH,
        nethack.NLE_BL_XP,
        nethack.NLE_BL_TIME,
        nethack.NLE_BL_GOLD,
    )


def test_stats_track_blstats_during_the_game():
    env = make_raw("nethack/score", max_episode_steps=30)
    obs, _ = env.reset(seed=11)
    for _ in range(29):
        obs, *_ = env.step(1)
    blstats = obs["blstats"].copy()
    _obs, _r, _term, truncated, info = env.step(1)
    assert truncated
    stats = info["episode_stats"]
    # The final step's blstats are zeroed by NLE quitting the game: the stats are the
    # values of the step before, exactly.
    assert stats["turns"] == blstats[nethack.NLE_BL_TIME] > 0
    assert stats["depth"] == blstats[nethack.NLE_BL_DEPTH]
    assert stats["score"] == blstats[nethack.NLE_BL_SCORE]
    assert stats["experience_level"] == blstats[nethack.NLE_BL_XP]
    assert stats["gold"] == blstats[nethack.NLE_BL_GOLD]
    env.close()


# -- observation keys ---------------------------------------------------------------------


def test_observation_keys_variants():
    every = [key for key, _ in nle_base.NLE_SPACE_ITEMS]
    assert resolve_observation_keys("lean") == DEFAULT_OBSERVATION_KEYS
    assert resolve_observation_keys("all") == tuple(k for k in every if k != "internal")
    assert resolve_observation_keys("nle") is None
    assert resolve_observation_keys("tty_chars") == ("tty_chars",)
    assert resolve_observation_keys(["glyphs", "inv_strs"]) == ("glyphs", "inv_strs")
    with pytest.raises(ValueError, match=r"unknown NLE observation key.*'glpyhs'.*glyphs"):
        resolve_observation_keys(("glpyhs",))


def test_full_observation_set_is_one_kwarg_away():
    env = make_raw("nethack/score", observation_keys="all")
    obs, _ = env.reset(seed=0)
    assert "tty_chars" in obs and "screen_descriptions" in obs and "internal" not in obs
    env.close()
    env = make_raw("nethack/nethack", observation_keys="nle")
    nle_default = inspect.signature(nle_base.NLE.__init__).parameters["observation_keys"].default
    assert set(env.observation_space.spaces) == set(nle_default)
    env.close()


def test_kwargs_pass_through_to_nle():
    env = make_raw("nethack/score", character="val-dwa-law-fem", max_episode_steps=7, penalty_step=-0.5)
    inner = env.nle
    assert inner.character == "val-dwa-law-fem"
    assert inner._max_episode_steps == 7
    assert inner.penalty_step == -0.5
    env.close()
    with pytest.raises(APIUsageError, match="nethack/score does not take kwarg no_such_option"):
        make_raw("nethack/score", no_such_option=1)


# -- rendering ------------------------------------------------------------------------------


def test_no_render_mode_by_default_and_a_chosen_mode_renders():
    env = make_raw("nethack/score")
    assert env.render_mode is None  # nle's own default, "human", reads tty_* keys the lean default leaves out
    env.close()
    env = make_raw("nethack/score", render_mode="ansi", observation_keys="all")
    env.reset(seed=0)
    assert env.render_mode == "ansi" and "@" in env.render()
    env.close()


def test_render_mode_without_its_observation_keys_says_which_to_add():
    message = r"render_mode='human' renders from the observation keys tty_chars, tty_colors, tty_cursor, which"
    with pytest.raises(ValueError, match=message + r".*add them to observation_keys"):
        make_raw("nethack/score", render_mode="human")


# -- seeding --------------------------------------------------------------------------------


def trajectory(seed: int | None, steps: int = 60, episodes: int = 2) -> list[np.ndarray]:
    """Glyphs and blstats after reset and after a fixed action sequence, for a few episodes."""
    env = make_raw("nethack/score")
    out = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        out += [obs["glyphs"].copy(), obs["blstats"].copy()]
        for i in range(steps):
            obs, _r, terminated, truncated, _info = env.step(i % env.action_space.n)
            if terminated or truncated:
                break
        out += [obs["glyphs"].copy(), obs["blstats"].copy()]
    env.close()
    return out


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_same_seed_same_games():
    first, second = trajectory(123), trajectory(123)
    assert same(first, second)  # both episodes: the seeded one and the one after it


def test_different_seeds_different_games():
    a, b = trajectory(1, episodes=1), trajectory(2, episodes=1)
    assert not np.array_equal(a[0], b[0])  # different maps right after reset


def test_unseeded_reset_continues_the_seeded_sequence():
    games = trajectory(5, steps=0, episodes=2)
    assert not np.array_equal(games[0], games[4])  # episode 2 is a new game, not a replay


def test_same_seed_resets_to_the_same_game_on_one_env():
    env = make_raw("nethack/staircase")
    first, _ = env.reset(seed=9)
    first = first["glyphs"].copy()
    env.step(3)
    again, _ = env.reset(seed=9)
    assert np.array_equal(first, again["glyphs"])
    env.close()


def test_challenge_is_seeded_too():
    # NLE's NetHackChallenge refuses seed(); the plugin seeds it below that refusal.
    def first_glyphs(seed):
        env = make_raw("nethack/challenge")
        obs, _ = env.reset(seed=seed)
        for _ in range(10):
            obs, *_ = env.step(0)
        env.close()
        return obs["glyphs"].copy(), obs["blstats"].copy()

    a, b, c = first_glyphs(3), first_glyphs(3), first_glyphs(4)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not (np.array_equal(a[0], c[0]) and np.array_equal(a[1], c[1]))
