"""Zero copy: the frame stack lives in the emulator's buffer; raw frames are rendered into it.

Compared with the copying path (the same env with the binding refused), over seeded
rollouts, in one env and in a 2-worker Multiprocessing run; and checked that what the frame
stack (or ALE) writes into *is* the emulator's buffer - in the workers, the final shared memory.
"""

from __future__ import annotations

import ale_py  # noqa: F401  (a dependency: a broken install must fail, not skip)
import gymnasium
import numpy as np
import pytest
from puffer_plugin_atari.wrappers import FrameStack, bind_ale_screen

import puffer_core
from puffer_core import make_raw, vector
from puffer_core.emulation import Buffers, GymnasiumEmulator
from puffer_core.postprocess import EpisodeStats
from puffer_core.testing import rollout as vector_rollout


class Copying(gymnasium.Wrapper):
    """Refuses the emulator's buffer, so the emulator copies every observation (the old path)."""

    def puffer_bind_observation(self, view):
        return False


def frame_stack(env) -> FrameStack:
    layer = env
    while not isinstance(layer, FrameStack):
        layer = layer.env
    return layer


class ReportsBuffer(gymnasium.Wrapper):
    """Adds where the frame stack lives (an address) to the episode-end info; no hook of its own."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            frames = frame_stack(self.env).frames
            info = {**info, "frames_address": frames.__array_interface__["data"][0], "same": int(obs is frames)}
        return obs, reward, terminated, truncated, info


def copying_env(**kwargs):
    return GymnasiumEmulator(EpisodeStats(Copying(make_raw("atari/breakout", **kwargs)), keep_keys=("life_lost",)))


def rollout(env, seed: int, steps: int = 100) -> list:
    """(observation, reward, terminated, truncated, info) of a seeded rollout with seeded random actions."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = [(obs.copy(), 0.0, False, False, {})]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        out.append((obs.copy(), reward, terminated, truncated, info))
        if terminated or truncated:
            obs, _ = env.reset()
            out.append((obs.copy(), 0.0, False, False, {}))
    return out


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(np.array_equal(x[0], y[0]) and x[1:] == y[1:] for x, y in zip(a, b))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"grayscale": False, "frame_stack": 2},
        {"preprocess": False},
        {"preprocess": False, "obs_type": "ram"},
        {"frame_stack": 1},  # no stack: the preprocessing makes a new frame each step, copied
    ],
)
def test_observations_match_the_copying_path(kwargs):
    kwargs = {**kwargs, "max_num_frames_per_episode": 240}
    bound = puffer_core.make("atari/breakout", **kwargs)
    assert bound.zero_copy == (kwargs.get("frame_stack") != 1)
    a, b = rollout(bound, 8), rollout(copying_env(**kwargs), 8)
    assert len(a) > 101  # an autoreset on the way
    assert same(a, b)  # observations, rewards, flags and infos
    assert same(a, rollout(bound, 8))  # same seed, same trajectory: determinism holds with the binding
    assert not same(a[:6], rollout(bound, 9, steps=5))
    bound.close()


def test_the_stack_is_the_buffer_and_runs_oldest_to_newest():
    env = puffer_core.make("atari/breakout")
    stack = frame_stack(env.env)
    assert env.zero_copy and stack.bound and np.shares_memory(stack.frames, env.buf.observations)
    env.reset(seed=2)
    frames = env.unflatten_observation(env.buf.observations[0])  # the buffer (reset returns a copy)
    assert np.shares_memory(frames, stack.frames) and (frames == frames[0]).all()  # the first frame fills it
    previous = frames.copy()
    for step in range(20):
        obs, *_ = env.step_in_place(step % 4)
        frames = env.unflatten_observation(obs)
        assert np.array_equal(frames[:3], previous[1:])  # shifted by one, newest last
        previous = frames.copy()
    env.close()


def test_raw_frames_are_rendered_into_the_buffer():
    env = puffer_core.make("atari/breakout", preprocess=False)
    atari = env.env.unwrapped
    obs, _ = env.reset(seed=0)
    assert env.zero_copy and np.shares_memory(atari._get_obs(), env.buf.observations)
    assert np.array_equal(env.unflatten_observation(obs), atari.ale.getScreenRGB())
    assert not bind_ale_screen(atari, np.zeros((210, 160, 3), np.float32))
    assert not bind_ale_screen(atari, np.zeros((160, 210, 3), np.uint8))
    assert not bind_ale_screen(atari, np.zeros((160, 210, 3), np.uint8).transpose(1, 0, 2))  # not C-contiguous
    env.close()


@pytest.mark.parametrize("kwargs", [{}, {"preprocess": False}])
def test_attaching_to_new_buffers_moves_the_binding(kwargs):
    env = puffer_core.make("atari/breakout", **kwargs)
    reference = copying_env(**kwargs)
    env.reset(seed=6)
    reference.reset(seed=6)
    for step in range(10):
        env.step(step % 4)
        reference.step(step % 4)
    old = env.buf.observations
    shared = Buffers.allocate(1, env.observation_space)  # mid-episode, even: the stack moves along
    env.attach(shared)
    assert env.zero_copy
    for step in range(30):
        obs, *_ = env.step_in_place(step % 4)
        expected, *_ = reference.step(step % 4)
        assert np.shares_memory(obs, shared.observations) and np.array_equal(obs, expected), step
    assert not np.array_equal(old, shared.observations)  # the old buffer is no longer written
    env.close()


def _vector_rollout(env, seed: int, steps: int = 40, **kwargs) -> dict:
    with vector.make(env, num_envs=4, num_workers=2, backend="multiprocessing", seed=seed, **kwargs) as envs:
        return vector_rollout(envs, steps, seed, rng_seed=seed)


def test_two_worker_multiprocessing_matches_the_copying_path():
    limit = {"max_num_frames_per_episode": 120}
    bound = _vector_rollout("atari/breakout", 4, **limit)
    copying = _vector_rollout(lambda: Copying(make_raw("atari/breakout", **limit)), 4)
    assert bound.keys() == copying.keys()
    for key in bound:
        assert np.array_equal(bound[key], copying[key]), key
    assert bound["trunc"].any()  # autoresets on the way


def test_workers_bind_the_final_shared_memory():
    # Built like puffer_core.make builds it (an emulator on a buffer of its own), then handed
    # rows of shared memory by the worker: the stack must end up in those rows.
    def creator():
        return GymnasiumEmulator(EpisodeStats(ReportsBuffer(make_raw("atari/breakout", max_num_frames_per_episode=40))))

    fork = {"start_method": "fork"}  # the children map the shared memory where the parent has it
    with vector.make(creator, num_envs=4, num_workers=2, backend="multiprocessing", seed=1, vector_kwargs=fork) as envs:
        obs, _ = envs.reset(seed=1)  # the shared-memory observation rows themselves
        ends = []
        for _ in range(12):
            _, _, _, _, infos = envs.step(np.ones(envs.num_envs, np.int64))
            ends += [info for info in infos if "frames_address" in info]
        assert {info["env_id"] for info in ends} == {0, 1, 2, 3}
        for info in ends:  # fork: the workers map the shared memory where the main process sees it
            assert info["frames_address"] == obs[info["env_id"]].__array_interface__["data"][0], info
            assert info["same"] == 1  # the observation is the stack itself: nothing to copy


def test_frame_stack_shift_matches_a_plain_stack_and_pickles():
    import pickle

    env = FrameStack(gymnasium.make("CartPole-v1"), 3)  # float64 frames: the byte-level shift is dtype-blind
    obs, _ = env.reset(seed=0)
    stack = [obs[-1]] * 3
    for step in range(12):
        obs, *_ = env.step(step % 2)
        stack = [*stack[1:], env.env.unwrapped.state.astype(obs.dtype)]
        assert np.array_equal(obs, np.stack(stack)), step
    again = pickle.loads(pickle.dumps(env))
    assert np.array_equal(again.frames, env.frames)
    assert np.array_equal(again.step(0)[0][:2], env.frames[1:])
    env.close()
