"""``glyphs_crop``: the glyphs around the agent, on the real nle, alone, emulated, vectorized and recorded."""

from __future__ import annotations

import numpy as np
import pytest
from nle import nethack
from puffer_plugin_nethack import TRAIN_KWARGS
from puffer_plugin_nethack.crop import blank_glyph

import puffer_core
from puffer_core import make_raw, vector

KEYS = ("glyphs", "glyphs_crop", "blstats", "chars")


def expected_crop(glyphs: np.ndarray, x: int, y: int, size: int) -> np.ndarray:
    """The window by padding the whole map (the slow, obvious way)."""
    r = size // 2
    padded = np.pad(glyphs, r, constant_values=nethack.GLYPH_CMAP_OFF)
    return padded[y : y + size, x : x + size]


@pytest.mark.parametrize("size", [9, 21])
def test_the_crop_is_the_window_centred_on_the_agent(size):
    env = make_raw("nethack/score", observation_keys=KEYS, crop_size=size)
    assert set(env.observation_space.spaces) == set(KEYS)
    assert env.observation_space["glyphs_crop"].shape == (size, size)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=1)
    edges = 0
    for _ in range(400):
        x, y = (int(v) for v in obs["blstats"][:2])
        crop = obs["glyphs_crop"]
        assert env.observation_space.contains(obs)
        assert chr(obs["chars"][y, x]) == "@"  # the agent's own cell is the crop's centre
        expected = expected_crop(obs["glyphs"], x, y, size)
        expected[size // 2, size // 2] = crop[size // 2, size // 2]  # what it stands on (tested below)
        np.testing.assert_array_equal(crop, expected)
        edges += y < size // 2 or y > 20 - size // 2 or x < size // 2 or x > 78 - size // 2
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            obs, _ = env.reset()
    assert edges  # cells beyond the map came into the window: the padding was checked too
    assert blank_glyph() == nethack.GLYPH_CMAP_OFF
    env.close()


def test_the_centre_shows_the_stairs_the_agent_stands_on():
    env = make_raw("nethack/score", observation_keys=("glyphs_crop", "internal"), max_episode_steps=2000)
    stairs_down = nethack.GLYPH_CMAP_OFF + 24  # S_dnstair
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    on_stairs = shown = 0
    for _ in range(30_000):
        # nle's internal[4]: the agent is on the stairs down (hidden state: for this test only)
        on_stairs += bool(obs["internal"][4])
        if obs["glyphs_crop"][4, 4] == stairs_down:
            shown += 1
            assert obs["internal"][4], "the centre showed stairs the agent was not on"
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            obs, _ = env.reset()
    assert shown > 0 and shown >= on_stairs // 2  # seen most times (unknown only when it arrived by them)
    env.close()


def test_only_the_keys_asked_for_are_observed():
    env = make_raw("nethack/score", observation_keys=("glyphs_crop",))
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"glyphs_crop"} and set(env.observation_space.spaces) == {"glyphs_crop"}
    assert (obs["glyphs_crop"] != nethack.GLYPH_CMAP_OFF).sum() > 1  # the agent and what is around it
    env.close()


def test_emulated_envs_write_the_crop_without_a_copy():
    env = puffer_core.make("nethack/score", **TRAIN_KWARGS)
    assert env.zero_copy
    obs, _ = env.reset(seed=2)
    nested = env.unflatten_observation(env.buf.observations[0])
    inner = env.env.env  # the emulator's EpisodeStats, then the plugin's NetHackWrapper
    while not hasattr(inner, "_crop"):
        inner = inner.env
    assert np.shares_memory(inner._crop, env.buf.observations)
    x, y = (int(v) for v in nested["blstats"][:2])
    assert nested["glyphs_crop"][4, 4] == nethack.GLYPH_CMAP_OFF  # after a reset: unknown
    assert (nested["glyphs_crop"] != nethack.GLYPH_CMAP_OFF).any() and x > 0 and y > 0
    env.close()


def test_vectorized_crops_match_single_envs():
    kwargs = {**TRAIN_KWARGS, "max_episode_steps": 30}
    actions = np.random.default_rng(3).integers(0, 23, (40, 2))
    with vector.make("nethack/score", num_envs=2, num_workers=2, backend="multiprocessing", seed=7, **kwargs) as envs:
        obs, _ = envs.reset(seed=7)
        rows = [obs.copy()]
        for step in actions:
            obs, *_ = envs.step(step)
            rows.append(obs.copy())
    with vector.make("nethack/score", num_envs=2, backend="serial", seed=7, **kwargs) as envs:
        obs, _ = envs.reset(seed=7)
        again = [obs.copy()]
        for step in actions:
            obs, *_ = envs.step(step)
            again.append(obs.copy())
    assert all(np.array_equal(a, b) for a, b in zip(rows, again))


def test_the_crop_records_in_colour(tmp_path):
    env = make_raw("nethack/score", observation_keys=("glyphs_crop", "blstats"), render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"glyphs_crop", "blstats"} and "\x1b[" in env.render()
    env.close()


@pytest.mark.parametrize("size", [0, 4, "9", True])
def test_a_bad_crop_size_is_refused(size):
    with pytest.raises(Exception, match="crop_size must be an odd number"):
        make_raw("nethack/score", observation_keys=("glyphs_crop",), crop_size=size)
