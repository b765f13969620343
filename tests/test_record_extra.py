"""The record extra alone records CartPole: a fresh venv with puffer-core[record] (within the
running Python's verified set, as README installs), then `puffer run classic/cartpole --record
X.mp4` writes a playable MP4 (gymnasium's classic control draws with pygame, which the extra brings)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import pytest
from test_dist import fresh_env

from puffer_core.matrix.shipped import SHIPPED_DIR

ROOT = Path(__file__).resolve().parents[1]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
CARTPOLE_FRAME = (400, 600, 3)  # gymnasium's CartPole rgb_array screen


@pytest.mark.slow
def test_the_record_extra_alone_records_cartpole_to_mp4(tmp_path):
    uv = shutil.which("uv") or pytest.fail("uv is part of the dev extra")
    venv, env = tmp_path / "venv", fresh_env()
    subprocess.run([uv, "venv", "-q", "--python", PYTHON, str(venv)], check=True, env=env, timeout=300)
    constraints = SHIPPED_DIR / f"constraints-py{PYTHON}.txt"
    install = [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "-c", str(constraints)]
    subprocess.run([*install, "-e", f"{ROOT}[record]"], check=True, env=env, cwd=tmp_path, timeout=900)
    # Nothing else: no gymnasium[classic-control], no plugin (their pygame would hide a missing one).
    listed = subprocess.run(
        [uv, "pip", "freeze", "--python", str(venv / "bin" / "python")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert not [line for line in listed.splitlines() if line.startswith("puffer-plugin")], listed

    video = tmp_path / "run.mp4"
    command = [str(venv / "bin" / "puffer"), "run", "classic/cartpole", "--steps", "200", "--record", str(video)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"recorded env 0 to {video}" in proc.stdout
    frames = iio.imread(video, index=None)
    assert frames.shape[0] >= 10 and frames.shape[1:] == CARTPOLE_FRAME
    assert frames.std() > 0  # a drawn cart and pole, not a blank screen
