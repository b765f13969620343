"""Breakout recorded: MP4 and GIF decoded back with imageio, the ALE screen at the
plugin's 15 frames a second, recorded inside the worker that steps env 0."""

from __future__ import annotations

import os

import imageio.v3 as iio
import numpy as np
import pytest

from puffer_core import vector
from puffer_core.testing import plan_recording, played_frames

SCREEN = (210, 160)  # ALE's frame, height x width


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_breakout_records_its_screen(tmp_path, suffix):
    path = tmp_path / f"breakout{suffix}"
    with vector.make("atari/breakout", num_envs=2, num_workers=2, backend="multiprocessing", record=str(path)) as envs:
        envs.reset(seed=0)
        for _ in range(40):
            envs.step(np.ones(2, dtype=np.int64))  # FIRE, so the ball moves
    frames = iio.imread(path, index=None)
    assert frames.shape[1:3] == SCREEN and played_frames(path, 15) == 41
    assert len({frame.tobytes() for frame in frames}) > 1  # the game moves
    assert os.listdir(tmp_path) == [path.name]


def test_breakout_plays_at_15_frames_a_second(tmp_path):
    recording = plan_recording("atari/breakout", tmp_path / "b.mp4")
    assert recording.fps == 15.0 and recording.env_kwargs == {"render_mode": "rgb_array"}


def test_breakout_cannot_record_text(tmp_path):
    from puffer_core.errors import APIUsageError

    with pytest.raises(APIUsageError, match=r"atari/breakout cannot record to \.cast.*\.mp4 or \.gif instead"):
        plan_recording("atari/breakout", tmp_path / "b.cast")
