"""A PettingZoo butterfly env recorded: a multi-agent env's rgb_array frames, from env 0's
worker, one per step, and an episode counted when all its agents are done."""

from __future__ import annotations

import os

import imageio.v3 as iio
import numpy as np
from puffer_core import vector
from puffer_core.testing import plan_recording, played_frames


def test_cooperative_pong_records_its_screen_from_a_worker(tmp_path):
    path = tmp_path / "pong.mp4"
    recording = plan_recording("pettingzoo/cooperative_pong", path)
    with vector.make(
        "pettingzoo/cooperative_pong",
        num_envs=2,
        num_workers=2,
        backend="multiprocessing",
        record=recording,
    ) as envs:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(12):
            envs.step(rng.integers(0, envs.single_action_space.n, size=envs.num_envs))
    frames = iio.imread(path, index=None)
    assert frames.ndim == 4 and frames.shape[-1] == 3 and frames.shape[1] > 100
    assert played_frames(path, recording.fps) == 13  # the reset and 12 steps
    assert os.listdir(tmp_path) == ["pong.mp4"]
