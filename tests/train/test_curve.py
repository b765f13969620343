"""`puffer_core.train.curve`: a curve of bounded size however long the run, whose summary
keeps what the run did exactly (counts, sums, extremes), and whose saved form is checked.
Torch-free: these run wherever numpy does."""

from __future__ import annotations

import csv
import io
import math
import pickle
import random

import pytest

from puffer_core.errors import APIUsageError
from puffer_core.train.curve import MAX_STATE_VALUES, RECENT, Curve
from puffer_core.train.episode_bins import NUM_BINS, EpisodeBins
from puffer_core.train.saved_data import Shape, check_plain
from puffer_core.train.update_rows import MAX_ROWS, UpdateRows

#: The shape a checkpoint holds a curve to (puffer_core.train.checkpoint).
CURVE_SHAPE = Shape(max_nodes=MAX_STATE_VALUES, max_depth=4, max_text=256)


def one_step_run(curve: Curve, steps: int, envs: int = 8, rollout: int = 1024, start: int = 0) -> None:
    """What probe_1 feeds a curve: every env ends an episode every step, an update per rollout."""
    for step in range(start + envs, start + steps + 1, envs):
        for _ in range(envs):
            curve.add_episode(step, 1.0, 1)
        if step % rollout == 0:
            curve.add_row(step=step, seconds=step / 1e5, steps_per_second=1e5, policy_loss=0.1, learning_rate=1e-3)


def test_a_million_episodes_keep_the_curve_and_its_saved_form_bounded():
    curve = Curve()
    one_step_run(curve, 10**6, rollout=256)
    state = curve.to_state()
    assert curve.episode_count == 10**6 and len(curve.episodes) == RECENT
    assert len(curve.rows) <= MAX_ROWS and len(state["bins"]["bins"]) <= NUM_BINS
    check_plain(state, "curve", CURVE_SHAPE)  # what a checkpoint accepts
    size = len(pickle.dumps(state))
    assert size < 600_000, size
    # Ten times longer: the same bound (the size depends on the bins, not on the episodes).
    one_step_run(curve, 9 * 10**6, rollout=256 * 10, start=10**6)
    assert abs(len(pickle.dumps(curve.to_state())) - size) < size / 4
    check_plain(curve.to_state(), "curve", CURVE_SHAPE)


def test_merged_bins_keep_count_sum_least_and_greatest_exactly():
    rng = random.Random(0)
    bins = EpisodeBins()
    episodes = []
    step = 0
    for _ in range(200_000):
        step += rng.randrange(0, 40)
        episode = (step, float(rng.randrange(-1000, 1000)), rng.randrange(1, 500))  # exact in binary
        episodes.append(episode)
        bins.add(*episode)
    assert bins.width > 1024  # merged many times over
    saved = bins.to_state()["bins"]  # [index, count, return sum, least, greatest, length sum] each
    assert sum(b[1] for b in saved) == bins.total == len(episodes)
    assert sum(b[2] for b in saved) == sum(r for _, r, _ in episodes)
    assert sum(b[5] for b in saved) == sum(n for _, _, n in episodes)
    assert min(b[3] for b in saved) == min(r for _, r, _ in episodes)
    assert max(b[4] for b in saved) == max(r for _, r, _ in episodes)
    filled = bins.filled()
    for b in filled:  # each bin holds exactly the episodes that ended within its steps
        inside = [r for s, r, _ in episodes if b["start"] <= s < b["end"]]
        assert (b["count"], b["min_return"], b["max_return"]) == (len(inside), min(inside), max(inside))


def test_merged_rows_keep_the_runs_state_and_average_its_updates():
    table = UpdateRows()
    for update in range(1, 5 * MAX_ROWS + 1):
        loss = float(update % 2)  # alternating: a merged row of whole pairs averages 0.5
        row = {column: None for column in ("steps_per_second", "mean_return", "mean_length", "value_loss")}
        row.update(step=256 * update, seconds=float(update), episodes=update, updates=1, learning_rate=1.0 / update)
        row.update(policy_loss=loss, entropy=None, approx_kl=0.0, clip_fraction=0.0, explained_variance=math.nan)
        row["steps_per_second"] = 256.0
        table.add(row)
    rows = table.rows
    assert len(rows) <= MAX_ROWS and table.width == 8
    assert sum(r["updates"] for r in rows) == 5 * MAX_ROWS
    assert all(r["updates"] == table.width for r in rows[:-1])
    assert rows[-1]["step"] == 256 * 5 * MAX_ROWS and rows[-1]["learning_rate"] == 1.0 / (5 * MAX_ROWS)
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    assert all(r["policy_loss"] == 0.5 and r["steps_per_second"] == 256.0 for r in rows[:-1])
    assert all(r["entropy"] is None and math.isnan(r["explained_variance"]) for r in rows)


def test_a_curve_saved_and_read_goes_on_as_one_that_never_stopped():
    whole, first = Curve(), Curve()
    one_step_run(whole, 300_000)
    one_step_run(first, 150_016)
    resumed = Curve.from_state(pickle.loads(pickle.dumps(first.to_state())))
    one_step_run(resumed, 300_000 - 150_016, start=150_016)
    assert resumed.to_state() == whole.to_state()
    assert resumed.csv_bytes() == whole.csv_bytes()


def test_short_runs_keep_a_row_per_update_and_every_episode():
    curve = Curve()
    one_step_run(curve, 4096, envs=4, rollout=512)
    assert curve.episodes == [(step, 1.0, 1) for step in range(4, 4097, 4) for _ in range(4)][-RECENT:]
    rows = list(csv.DictReader(io.StringIO(curve.csv_bytes().decode())))
    assert [int(r["step"]) for r in rows] == list(range(512, 4097, 512)) and {r["updates"] for r in rows} == {"1"}
    assert rows[-1]["episodes"] == "4096" and float(rows[-1]["mean_return"]) == 1.0


def test_a_format_1_curve_is_summarised():
    legacy_rows = [
        {"step": 8 * n, "seconds": 0.1 * n, "steps_per_second": 80.0, "episodes": 8 * n, "mean_return": 1.0}
        | dict.fromkeys(("mean_length", "policy_loss", "value_loss", "entropy", "approx_kl"), 1.0)
        | dict.fromkeys(("clip_fraction", "explained_variance", "learning_rate"), 0.0)
        for n in range(1, 3001)
    ]
    legacy = {"rows": legacy_rows, "episodes": [[step, 1.0, 1] for step in range(1, 24_001)]}
    curve = Curve.from_legacy(legacy)
    assert curve.episode_count == 24_000 and curve.episodes[-1] == (24_000, 1.0, 1)
    assert len(curve.rows) <= MAX_ROWS and sum(r["updates"] for r in curve.rows) == 3000
    assert curve.rows[-1]["step"] == 24_000
    check_plain(curve.to_state(), "curve", CURVE_SHAPE)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"episode_count": 3}, "is not the count of the episodes it holds"),
        ({"recent": [[1, "one", 1]]}, "not [step, return, length]"),
        ({"recent": [[0, 1.0, 1]] * (RECENT + 1)}, f"at most {RECENT:,}"),
        ({"bins": {"width": 3, "bins": []}}, "width 3, not a power of two"),
        ({"bins": {"width": 1, "bins": [[NUM_BINS, 1, 1.0, 1.0, 1.0, 1.0]]}}, f"not a new one below {NUM_BINS}"),
        ({"bins": {"width": 1, "bins": [[0, 0, 1.0, 1.0, 1.0, 1.0]]}}, "count 0, not a positive int"),
        ({"rows": {"width": 1, "rows": [{"step": 1}]}}, "a curve row lacks seconds, steps_per_second"),
        ({"rows": {"width": 1, "rows": [{"step": 1, "turbo": 1}]}}, "has unknown 'turbo'"),
        ({"rows": {"width": 1, "rows": []}, "extra": 1}, "not rows, bins, recent and episode_count"),
    ],
)
def test_a_saved_curve_that_is_not_one_is_refused_naming_what(change, message):
    curve = Curve()
    one_step_run(curve, 2048, rollout=512)
    state = curve.to_state() | change
    with pytest.raises(APIUsageError) as caught:
        Curve.from_state(state)
    assert message in str(caught.value)
