"""atari/* in native batches: ALE's own AtariVectorEnv (C++ threads, C++ preprocessing), hosted
by the backends with the per-env path's spaces and episode statistics."""

from __future__ import annotations

import numpy as np
import pytest
from ale_py.vector_env import AtariVectorEnv
from puffer_plugin_atari.envs import make_atari_batch

from puffer_core import vector
from puffer_core.errors import APIUsageError, WorkerError


def frames_after(seed: int, steps: int = 60) -> np.ndarray:
    """Each env's frames after ``steps`` steps of the same fixed actions (sticky actions and
    no-op starts draw from the seed)."""
    with vector.make("atari/breakout", num_envs=4, seed=seed, vector_kwargs={"native": True}) as envs:
        envs.reset(seed=seed)
        for t in range(steps):
            obs, *_ = envs.step(np.full(4, [1, 2, 3][t % 3]))
        return obs.copy()


def test_the_native_batch_is_ales_vector_env_set_up_as_the_per_env_path():
    batch = make_atari_batch("breakout", 3)
    try:
        assert isinstance(batch, AtariVectorEnv)
        with vector.make("atari/breakout", num_envs=1) as per_env:
            layout = per_env.driver_env.obs_layout
            assert batch.single_observation_space == layout.original_space  # (4, 84, 84) uint8
            assert batch.single_action_space == per_env.driver_env.action_layout.original_space  # minimal set
    finally:
        batch.close()


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_breakout_steps_in_native_batches_with_episode_statistics(backend):
    workers = None if backend == "serial" else 2
    with vector.make(
        "atari/breakout", num_envs=4, num_workers=workers, backend=backend, seed=0,
        vector_kwargs={"native": True}, max_num_frames_per_episode=800,
    ) as envs:  # fmt: skip
        assert envs.single_observation_space.shape == (4 * 84 * 84,)
        envs.async_reset(0)
        episodes, rng = [], np.random.default_rng(0)
        for _ in range(400):
            obs, rewards, terminals, truncations, infos, env_ids, _ = envs.recv()
            assert obs.dtype == np.uint8 and obs.any()
            episodes += [info for info in infos if "episode_return" in info]
            envs.send(rng.integers(0, 4, len(env_ids)))
    assert len(episodes) >= 4  # 800 frames = 200 steps an episode at most
    assert all(0 < info["episode_length"] <= 200 and "env_id" in info for info in episodes)
    assert all(info["lives"] >= 0 for info in episodes)  # ALE's info, numbers kept at the episode's end


def test_the_same_seed_gives_the_same_frames_and_env_i_is_seeded_seed_plus_i():
    first = frames_after(7)
    np.testing.assert_array_equal(first, frames_after(7))
    other = frames_after(8)
    assert not np.array_equal(first, other)
    np.testing.assert_array_equal(first[1:], other[:3])  # envs 1-3 of seed 7 are envs 0-2 of seed 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"preprocess": False}, "native batches of atari envs preprocess"),
        ({"mode": 0}, "ALE's vector env does not take mode; use native=False"),
    ],
)
def test_what_ales_vector_env_cannot_do_is_said(kwargs, message):
    with pytest.raises((WorkerError, APIUsageError), match=message):
        vector.make("atari/breakout", num_envs=2, vector_kwargs={"native": True}, **kwargs)
