"""The learning row of the training bench (puffer_core.bench.learning), smoke-tested on NetHack with
a tiny budget: it trains, plays the random baseline, keeps its files and renders."""

from __future__ import annotations

import json
import os

import pytest
from optional import require

from puffer_core.bench import learning, training
from puffer_core.errors import APIUsageError


def test_a_tiny_learning_run_on_nethack_fills_its_row(tmp_path):
    require("torch")
    require("matplotlib")
    require("nle")
    keep = tmp_path / "assets"
    row = learning.learning_run(
        "nethack/score",
        minutes=0.1,
        settings={"num_envs": 4, "rollout_steps": 32},
        env_kwargs={"max_episode_steps": 40},  # short games: episodes end within the budget
        random_episodes=8,
        keep=keep,
        record_steps=20,
    )
    assert row["steps"] > 0 and row["episodes"] > 0 and row["seconds"] >= 6
    assert row["settings"]["num_envs"] == 4 and row["settings"]["backend"] == "multiprocessing"  # the family's
    assert row["env_kwargs"] == {"observation_keys": ["glyphs_crop", "blstats"], "max_episode_steps": 40}
    assert row["random"]["episodes"] == 8 and row["random"]["steps"] >= 8
    assert row["trained_mean_return"] is not None and row["curve"] and len(row["curve"][0]) == 3
    assert row["reached"] == (row["ratio"] is not None and row["ratio"] >= learning.TARGET_RATIO)
    assert (keep / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cast = (keep / "nethack-score.cast").read_text().splitlines()
    assert json.loads(cast[0])["version"] == 2 and len(cast) > 5
    json.dumps(row)  # what the bench run stores
    markdown = training.render_markdown({"cartpole": _no_cartpole(), "throughput": [], "learning": row})
    assert "### Learning: `nethack/score` in 0.1 minutes" in markdown and "| random | 8 |" in markdown


def _no_cartpole() -> dict:
    return {"trials": [], "settings": {}, "ratio": None, "puffer_median_seconds": None, "sb3_median_seconds": None}


def test_the_budget_is_at_most_thirty_minutes():
    with pytest.raises(ValueError, match="minutes must be in"):
        learning.learning_run(minutes=31)


def test_a_keep_folder_others_can_write_is_refused_before_training(tmp_path):
    require("torch")
    shared = tmp_path / "assets"
    shared.mkdir()
    os.chmod(shared, 0o777)  # the curve and the recording would land where anyone can plant a symlink
    with pytest.raises(APIUsageError, match=f"^{shared} is writable by others"):
        learning.learning_run("classic/cartpole", minutes=0.05, keep=shared)
    assert os.listdir(shared) == []
