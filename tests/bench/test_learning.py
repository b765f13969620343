"""The learning bench (puffer_core.bench.learning): a tiny run over two seeds on NetHack (it trains,
plays the random baseline, keeps the first seed's files and renders), and the section's summary."""

from __future__ import annotations

import json
import os
import re

import pytest
from optional import require

from puffer_core.bench import learning
from puffer_core.errors import APIUsageError


def test_a_tiny_learning_run_over_two_seeds_on_nethack_fills_its_section(tmp_path):
    require("torch")
    require("matplotlib")
    require("nle")
    keep = tmp_path / "assets"
    section = learning.learning_runs(
        "nethack/score",
        minutes=0.1,
        seeds=(3, 5),
        keep=keep,
        settings={"num_envs": 4, "rollout_steps": 32},
        env_kwargs={"max_episode_steps": 40},  # short games: episodes end within the budget
        random_episodes=8,
        record_steps=20,
    )
    assert [run["settings"]["seed"] for run in section["runs"]] == [3, 5]
    for row in section["runs"]:
        assert row["steps"] > 0 and row["episodes"] > 0 and row["seconds"] >= 6
        assert row["settings"]["num_envs"] == 4 and row["settings"]["backend"] == "multiprocessing"  # the family's
        assert row["env_kwargs"] == {"observation_keys": ["glyphs_crop", "blstats"], "max_episode_steps": 40}
        assert row["random"]["episodes"] == 8 and row["random"]["steps"] >= 8
        assert row["trained_mean_return"] is not None and row["curve"] and len(row["curve"][0]) == 3
    ratios = [row["ratio"] for row in section["runs"]]
    if None not in ratios:
        assert section["ratio_mean"] == pytest.approx(sum(ratios) / 2, abs=1e-3)
    # Only the first seed's files are kept.
    assert sorted(os.listdir(keep)) == ["curve.png", "nethack-score.cast"]
    assert section["files"] == {"curve": str(keep / "curve.png"), "recording": str(keep / "nethack-score.cast")}
    assert (keep / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    cast = (keep / "nethack-score.cast").read_text().splitlines()
    assert json.loads(cast[0])["version"] == 2 and len(cast) > 5
    json.dumps(section)  # what the bench run stores
    markdown = learning.render_markdown(section)
    assert "### Learning: `nethack/score` in 0.1 minutes, 2 seeds" in markdown
    # A return may be negative (NetHack's score can fall).
    assert re.search(r"^\| 3 \| [-\d.–]+ \| [-\d.]+ \|", markdown, re.M) and "\n| 5 | " in markdown


def _run(seed: int, trained: float | None, random: float) -> dict:
    """A learning_run row with just what the summary and the page read."""
    ratio = None if trained is None else round(trained / random, 3)
    return {
        "settings": {"seed": seed, "policy": "lstm", "num_envs": 32},
        "env_kwargs": {"observation_keys": ["glyphs_crop", "blstats"]},
        "window": 100,
        "trained_mean_return": trained,
        "random": {"episodes": 200, "mean_return": random},
        "ratio": ratio,
        "steps": 1000,
        "steps_per_second": 50.0,
        "episodes": 10,
    }


def test_the_section_gives_the_mean_and_spread_of_the_seeds_ratios():
    section = learning._summary("nethack/score", 30.0, [_run(0, 100.0, 20.0), _run(1, 60.0, 20.0), _run(2, 80.0, 20.0)])
    assert section["ratio_mean"] == 4.0 and section["ratio_std"] == pytest.approx(0.816, abs=1e-3)
    assert section["trained_mean_return"] == 80.0 and section["random_mean_return"] == 20.0
    assert section["reached"] is True and "files" not in section
    markdown = learning.render_markdown(section)
    assert "**4.00× ± 0.82** (mean ± standard deviation) (target 3×: reached)" in markdown
    assert "| 1 | 60.0 | 20.0 | 3.00× | 1,000 | 50 | 10 |" in markdown


def test_a_seed_that_ended_no_episode_fails_the_section_however_high_the_others():
    section = learning._summary("nethack/score", 30.0, [_run(0, 200.0, 20.0), _run(1, None, 20.0)])
    assert section["ratio_mean"] == 10.0 and section["reached"] is False
    assert "| 1 | – | 20.0 | – |" in learning.render_markdown(section)


def test_seeds_must_be_distinct_and_given():
    for seeds in ((), (1, 1)):
        with pytest.raises(ValueError, match="seeds must be distinct"):
            learning.learning_runs(minutes=1, seeds=seeds)


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
