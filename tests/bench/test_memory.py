"""The memory bench (puffer_core.bench.memory): what its samples say (flat or growing, at which
minutes), how it renders, and a short real run: sampled, stopped as by Ctrl-C, resumed."""

from __future__ import annotations

import re

from optional import require

from puffer_core.bench import memory, results
from puffer_core.bench.memory import COLUMNS, TRAIN_ARGS, memory_run, render_markdown, summarise

DATE_OR_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b")


def section(rss_growth_per_minute: float, checkpoint_growth_per_minute: float, minutes: int = 20) -> dict:
    """A memory run's section whose RSS and checkpoint grow linearly after the first minute."""
    samples = []
    for n in range(1, minutes * 6 + 1):
        seconds = 10.0 * n
        grown = max(0.0, seconds / 60 - 1)
        rss = 500.0 + rss_growth_per_minute * grown
        checkpoint = 250_000 + int(checkpoint_growth_per_minute * grown)
        samples.append(
            [seconds, rss, rss - 60, 4, checkpoint, 30_000, 10**8, 14_000 * int(seconds), 7_000 * int(seconds)]
        )
    samples.append([seconds + 2, 0.0, 0.0, 0, checkpoint, 30_000, 10**8, 14_000 * int(seconds), 7_000 * int(seconds)])
    resume = dict(load_seconds=0.5, exit_code=0, step_before=1, step_after=50_001, episodes_before=1, episodes_after=9)
    result = {
        "env": "classic/probe_1",
        "command": ["puffer", "train", "classic/probe_1", "--out", "RUN", *TRAIN_ARGS],
        "minutes": float(minutes),
        "interval": 10.0,
        "columns": list(COLUMNS),
        "samples": samples,
        "exit_code": 130,
        "scratch_left": [],
        "resume": {**resume, "continued": True},
    }
    return {**result, "summary": summarise(result)}


def test_flat_memory_is_flat_and_growing_memory_is_not():
    flat = section(0.0, 0.0)["summary"]
    assert all(item["flat"] for item in flat["flat"].values())
    assert list(flat["marks"]) == ["1", "5", "10", "20"] and flat["marks"]["10"]["step"] == 14_000 * 600
    growing = section(25.0, 4_000_000.0)["summary"]["flat"]  # what a curve of every episode did
    assert not growing["rss_mb"]["flat"] and not growing["checkpoint_bytes"]["flat"]
    short = section(0.0, 0.0, minutes=3)["summary"]
    assert list(short["marks"]) == ["1"]


def test_the_section_renders_its_minutes_and_resume_without_a_date():
    text = render_markdown(section(0.0, 0.0))
    assert "| 10 | 8,400,000 | 4,200,000 | 500 | 440 | 244 |" in text
    assert "RSS flat, PSS flat, checkpoint size flat" in text and "`--resume` went on" in text
    growing = render_markdown(section(25.0, 0.0))
    assert "RSS GROWING" in growing and "checkpoint size flat" in growing
    document = {"machine": {"cpus": 2, "cpu_model": "Test CPU", "python": "3.11.7"}, "commit": "0" * 40}
    rendered = results.render_memory_section({**document, "memory": section(0.0, 0.0)})
    assert rendered.startswith("From the newest run in `bench-results/memory/`") and not DATE_OR_TIME.search(rendered)
    assert "`nox -s bench -- --memory` makes one" in results.render_memory_section(None)


def test_a_short_run_is_sampled_stopped_and_resumed(monkeypatch):
    require("torch")
    require("matplotlib")
    require("tensorboard")
    monkeypatch.setattr(memory, "RESUME_STEPS", 4096)
    seen = []
    result = memory_run(0.3, 3.0, train_args=(*TRAIN_ARGS, "--set", "checkpoint_seconds=4"), progress=seen.append)
    rows = [dict(zip(COLUMNS, sample)) for sample in result["samples"]]
    assert len(seen) == len(rows) - 1 >= 5 and rows[-1]["processes"] == 0  # the last: after the run
    # Main and 2 workers at least, from the sample after they started (torch's import comes first:
    # on a slow machine the first sample or two find the main process alone).
    up = next(i for i, row in enumerate(rows) if row["processes"] >= 3)
    assert all(row["processes"] >= 3 and row["rss_mb"] > 100 for row in rows[up:-1]) and len(rows) - up >= 4, rows
    assert rows[-1]["checkpoint_bytes"] > 0 and rows[-1]["step"] > 0 and rows[-1]["episodes"] > 0
    assert result["exit_code"] == 130 and result["scratch_left"] == []
    resume = result["resume"]
    assert resume["continued"] and resume["step_after"] >= resume["step_before"] + 4096, resume
    assert resume["episodes_after"] > resume["episodes_before"] >= rows[-1]["episodes"]
