"""A DM Lab level recorded to a GIF (against the deepmind_lab TEST DOUBLE, since DeepMind
Lab has no installable package here): the plugin's rgb_array frames, from a worker."""

from __future__ import annotations

import os

import imageio.v3 as iio
import numpy as np
from puffer_core import vector
from puffer_core.testing import played_frames


def test_a_level_records_its_frames_from_a_worker(lab_double_everywhere, tmp_path):
    path = tmp_path / "level.gif"
    with vector.make(
        "dmlab/seekavoid_arena_01",
        num_envs=2,
        num_workers=2,
        backend="multiprocessing",
        record=str(path),
    ) as envs:
        envs.reset(seed=0)
        for _ in range(6):
            envs.step(np.zeros((envs.num_envs, *envs.single_action_space.shape), dtype=envs.single_action_space.dtype))
    frames = iio.imread(path, index=None)
    assert frames.ndim == 4 and frames.shape[-1] in (3, 4)
    assert played_frames(path, 15) == 7  # the reset and 6 steps, at the level's 15 frames a second
    assert not [name for name in os.listdir(tmp_path) if "partial" in name]
