"""Zero copy: NetHack writes its observations straight into the emulator's (shared) buffer.

Compared with the copying path (the same env with the binding refused), over seeded
rollouts, in one env and in a 2-worker Multiprocessing run; and checked that what nle
writes into *is* the emulator's buffer - in the workers, the final shared memory.
"""

from __future__ import annotations

import gymnasium
import nle as _nle  # noqa: F401  (a dependency: a broken install must fail, not skip)
import numpy as np
import pytest
from puffer_plugin_nethack.wrappers import bind_nle_buffers, find_nle

import puffer_core
from puffer_core import make_raw, vector
from puffer_core.emulation import Buffers, GymnasiumEmulator
from puffer_core.postprocess import EpisodeStats
from puffer_core.testing import rollout as vector_rollout

LEAN = ("glyphs", "blstats", "message")


class Copying(gymnasium.Wrapper):
    """Refuses the emulator's buffer, so the emulator copies every observation (the old path)."""

    def puffer_bind_observation(self, views):
        return False


class ReportsBuffer(gymnasium.Wrapper):
    """Adds where nle writes its glyphs (an address) to the episode-end info; no hook of its own."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            glyphs = find_nle(self.env).nethack._obs_buffers["glyphs"]
            address = glyphs.__array_interface__["data"][0]
            info = {**info, "glyphs_address": address, "same": int(obs["glyphs"] is glyphs)}
        return obs, reward, terminated, truncated, info


def copying_env(**kwargs):
    return GymnasiumEmulator(EpisodeStats(Copying(make_raw("nethack/score", **kwargs))))


def nle_arrays(emulator):
    return find_nle(emulator.env).nethack._obs_buffers


def rollout(env, seed: int, steps: int = 120) -> list:
    """(observation, reward, terminated, truncated) of a seeded rollout with seeded random actions."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = [(obs.copy(), 0.0, False, False)]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        out.append((obs.copy(), reward, terminated, truncated))
        if terminated or truncated:
            obs, _ = env.reset()
            out.append((obs.copy(), 0.0, False, False))
    return out


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x[0], y[0]) and all(np.array_equal(p, q) for p, q in zip(x[1:], y[1:])) for x, y in zip(a, b)
    )


@pytest.mark.parametrize(
    "keys", [LEAN, ("tty_chars", "tty_colors", "tty_cursor"), ("blstats",), ("glyphs", "inv_strs", "internal")]
)
def test_nle_writes_into_the_emulator_buffer(keys):
    env = puffer_core.make("nethack/score", observation_keys=keys)
    assert env.zero_copy
    arrays = nle_arrays(env)
    env.reset(seed=3)
    nested = env.unflatten_observation(env.buf.observations[0])  # the buffer (reset returns a copy)
    for key in keys:
        assert np.shares_memory(arrays[key], env.buf.observations), key
        assert np.shares_memory(arrays[key], nested[key]) and np.array_equal(arrays[key], nested[key])
    env.step(1)
    assert all(np.shares_memory(nle_arrays(env)[key], env.buf.observations) for key in keys)
    env.close()


@pytest.mark.parametrize("keys", [LEAN, "all"])
def test_observations_match_the_copying_path(keys):
    kwargs = {"observation_keys": keys, "max_episode_steps": 40}
    bound = puffer_core.make("nethack/score", **kwargs)
    again = puffer_core.make("nethack/score", **kwargs)
    copying = copying_env(**kwargs)
    assert bound.zero_copy and again.zero_copy and not copying.zero_copy
    a, b, c = rollout(bound, 5), rollout(copying, 5), rollout(again, 5)
    assert len(a) > 122  # two autoresets on the way
    assert same(a, b)  # observations, rewards and flags
    assert same(a, c)  # same seed, same game: determinism holds with the binding
    assert not np.array_equal(a[0][0], rollout(again, 6, steps=0)[0][0])  # another seed, another game
    for env in (bound, again, copying):
        env.close()


def test_rebinds_when_attached_to_new_buffers_before_reset():
    env = puffer_core.make("nethack/score")
    first = env.buf.observations
    shared = Buffers.allocate(1, env.observation_space)  # as the vector layer hands rows of shared memory
    env.attach(shared)
    assert env.zero_copy
    assert np.shares_memory(nle_arrays(env)["glyphs"], shared.observations)
    assert not np.shares_memory(nle_arrays(env)["glyphs"], first)
    obs, _ = env.reset(seed=1)
    assert shared.observations.any() and np.array_equal(obs, shared.observations[0])
    env.close()


def test_after_the_first_reset_the_binding_is_refused_and_copying_still_works():
    raw = make_raw("nethack/score")
    raw.reset(seed=4)
    before = dict(find_nle(raw).nethack._obs_buffers)
    env = GymnasiumEmulator(EpisodeStats(raw))  # built around an env whose game already started
    assert not env.zero_copy
    assert all(find_nle(raw).nethack._obs_buffers[key] is array for key, array in before.items())
    reference = make_raw("nethack/score")
    obs, _ = env.reset(seed=9)
    expected, _ = reference.reset(seed=9)
    for step in range(30):
        nested = env.unflatten_observation(obs)
        assert all(np.array_equal(nested[key], expected[key]) for key in LEAN), step
        obs, *_ = env.step(step % 8)
        expected, *_ = reference.step(step % 8)
    # Once bound, a second offer after the reset is refused too; nle keeps the first buffer.
    bound = puffer_core.make("nethack/score")
    bound.reset(seed=0)
    old = bound.buf.observations
    bound.attach(Buffers.allocate(1, bound.observation_space))
    assert not bound.zero_copy and np.shares_memory(nle_arrays(bound)["glyphs"], old)
    obs, *_ = bound.step(0)
    assert np.array_equal(bound.unflatten_observation(obs)["glyphs"], nle_arrays(bound)["glyphs"])
    for e in (env, reference, bound):
        e.close()


def test_views_that_do_not_fit_are_refused():
    env = make_raw("nethack/score")
    nle = find_nle(env)
    arrays = nle.nethack._obs_buffers
    assert not bind_nle_buffers(nle, np.zeros(3))  # not a dict
    assert not bind_nle_buffers(nle, {"glyphs": np.zeros((21, 79), np.int32)})  # wrong dtype
    assert not bind_nle_buffers(nle, {"glyphs": np.zeros((79, 21), np.int16).T})  # not C-contiguous
    assert not bind_nle_buffers(nle, {"nope": np.zeros(3)})  # not an nle observation
    glyphs = np.zeros((21, 79), np.int16)
    overlapping = glyphs.view(np.uint8).reshape(-1)[: 21 * 79].reshape(21, 79)
    assert not bind_nle_buffers(nle, {"glyphs": glyphs, "chars": overlapping})  # two keys in one place
    assert nle.nethack._obs_buffers is arrays  # nothing changed
    assert bind_nle_buffers(nle, {"glyphs": glyphs})  # a plain array of the right kind is fine
    obs, _ = env.reset(seed=0)
    assert obs["glyphs"] is glyphs and glyphs.any()
    env.close()


def _vector_rollout(env, seed: int, steps: int = 50, **kwargs) -> dict:
    with vector.make(env, num_envs=4, num_workers=2, backend="multiprocessing", seed=seed, **kwargs) as envs:
        return vector_rollout(envs, steps, seed, rng_seed=seed)


def test_two_worker_multiprocessing_matches_the_copying_path():
    bound = _vector_rollout("nethack/score", 11, max_episode_steps=20)
    copying = _vector_rollout(lambda: Copying(make_raw("nethack/score", max_episode_steps=20)), 11)
    assert bound.keys() == copying.keys()
    for key in bound:
        assert np.array_equal(bound[key], copying[key]), key
    assert bound["term"].any() or bound["trunc"].any()  # autoresets on the way


def test_workers_bind_the_final_shared_memory():
    # Built like puffer_core.make builds it (an emulator on a buffer of its own), then handed
    # rows of shared memory by the worker: nle must end up writing into those rows.
    def creator():
        raw = ReportsBuffer(make_raw("nethack/score", max_episode_steps=10))
        return GymnasiumEmulator(EpisodeStats(raw))

    rng = np.random.default_rng(0)
    fork = {"start_method": "fork"}  # the children map the shared memory where the parent has it
    with vector.make(creator, num_envs=4, num_workers=2, backend="multiprocessing", seed=2, vector_kwargs=fork) as envs:
        obs, _ = envs.reset(seed=2)  # the shared-memory observation rows themselves
        ends = []
        for _ in range(12):
            _, _, _, _, infos = envs.step(rng.integers(0, 23, envs.num_envs))
            ends += [info for info in infos if "glyphs_address" in info]
        assert {info["env_id"] for info in ends} == {0, 1, 2, 3}
        for info in ends:
            # fork: the workers map the shared memory at the addresses the main process sees
            row = envs.driver_env.unflatten_observation(obs[info["env_id"]])["glyphs"]
            assert info["glyphs_address"] == row.__array_interface__["data"][0], info
            assert info["same"] == 1  # nle's observation is the bound array itself
