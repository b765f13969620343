"""puffer_core.train.progress: the progress lines of a run without a terminal, their format and their pace."""

from __future__ import annotations

from puffer_core.train.progress import ProgressLines, clock, progress_line


def test_a_line_says_the_step_the_rate_the_return_and_the_times():
    row = {"step": 12_288, "steps_per_second": 2_345.0, "mean_return": 21.3}
    line = progress_line(row, 200_000, elapsed=5.2)
    assert line == "step 12,288/200,000 (6.1%) | 2,345 steps/s | return 21.30 | elapsed 5s | eta 1m20s"
    first = progress_line({"step": 1_024, "steps_per_second": 0.0, "mean_return": None}, 200_000, elapsed=9)
    assert first.endswith("| return – | elapsed 9s | eta –")
    limited = progress_line(row, 200_000, elapsed=5, seconds_left=30)  # max_seconds ends it first
    assert limited.endswith("eta 30s")


def test_durations_read_as_people_say_them():
    assert [clock(s) for s in (0, 9.4, 307, 3723, 2 * 86400 + 3 * 3600 + 4 * 60)] == [
        "0s", "9s", "5m07s", "1h02m03s", "2d03h04m"]  # fmt: skip
    assert clock(None) == clock(float("inf")) == clock(-1) == "–"


def test_a_line_at_the_first_update_then_one_per_interval():
    now = [100.0]
    lines: list[str] = []
    progress = ProgressLines(1_000, every=30, write=lines.append, now=lambda: now[0])
    for moment, step in ((101, 100), (110, 200), (131, 300), (140, 400), (162, 500)):
        now[0] = moment
        progress({"step": step, "steps_per_second": 10.0, "mean_return": 1.0})
    assert [line.split(" ")[1] for line in lines] == ["100/1,000", "300/1,000", "500/1,000"]
