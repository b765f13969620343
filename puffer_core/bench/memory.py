"""Memory over a long run (a benchmark): does anything a run keeps grow with its length?

    python -m puffer_core.bench.memory [--minutes 20] [--interval 10] [--out bench-results/memory]

Runs ``puffer train classic/probe_1`` (one-step episodes: a million of them every few minutes,
the hardest case for whatever keeps episodes) on the Multiprocessing backend, for ``--minutes``,
and every ``--interval`` seconds samples the resident memory of its process tree (the main
process and its workers: RSS, and PSS, which counts pages a fork shares once), the size of its
checkpoint, ``curve.csv`` and TensorBoard folder, and the step and episodes its curve reached.
Then it stops the run as Ctrl-C would (the checkpoint is saved), checks that the run left no
scratch folder behind, loads the checkpoint, and resumes it (``--resume``) for a few more
seconds, checking the curve goes on. The run is stored as ``OUT/<UTC time>.json``;
``python -m puffer_core.bench.results`` renders a section of ``docs/performance.md`` from the newest.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from puffer_core.bench.runs import store_and_show
from puffer_core.vector.mp.scratch import PREFIX
from puffer_core.vector.process_memory import child_pids

__all__ = ["COLUMNS", "DEFAULT_MINUTES", "main", "memory_run", "render_markdown", "summarise", "tree_memory"]

DEFAULT_MINUTES = 20.0
DEFAULT_INTERVAL = 10.0
ENV = "classic/probe_1"
#: What the run trains with beyond `puffer train ENV`'s defaults: workers, so the tree has some.
TRAIN_ARGS = ("--backend", "multiprocessing", "--num-workers", "2", "--steps", "1000000000000")
#: One sample: seconds since the start, then the process tree and the run directory's files.
COLUMNS = (
    "seconds",
    "rss_mb",
    "pss_mb",
    "processes",
    "checkpoint_bytes",
    "csv_bytes",
    "tensorboard_bytes",
    "step",
    "episodes",
)
#: The minutes the summary quotes (those the run reached).
MARKS = (1, 5, 10, 20)
#: Memory that moves by less than this between the run's halves is flat (allocator noise).
FLAT_MB, FLAT_SHARE = 16.0, 0.05
RESUME_STEPS = 50_000


def _kb(path: str, key: str) -> int | None:
    try:
        with open(path) as file:
            for line in file:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_memory(pid: int) -> tuple[float, float, int]:
    """(RSS MB, PSS MB, processes) of ``pid`` and its descendants (Linux ``/proc``)."""
    pids = [pid, *sorted(child_pids(pid))]
    rss = [_kb(f"/proc/{p}/status", "VmRSS:") for p in pids]
    pss = [_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids]
    alive = [i for i, kb in enumerate(rss) if kb is not None]
    return (
        round(sum(rss[i] for i in alive) / 1024, 1),
        round(sum(pss[i] or rss[i] for i in alive) / 1024, 1),
        len(alive),
    )


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(_size(child) for child in path.iterdir())
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _curve_reached(run: Path) -> tuple[int, int]:
    """(step, episodes) of the last row of ``run/curve.csv`` (0, 0 before the first)."""
    try:
        with open(run / "curve.csv", "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 4096))
            last = file.read().decode().strip().splitlines()[-1].split(",")
        return int(last[0]), int(last[3])
    except (OSError, ValueError, IndexError):
        return 0, 0


def _sample(started: float, pid: int, run: Path) -> list[float]:
    rss, pss, processes = tree_memory(pid)
    files = [_size(run / name) for name in ("policy.pt", "curve.csv", "tensorboard")]
    return [round(time.monotonic() - started, 1), rss, pss, processes, *files, *_curve_reached(run)]


def _train_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "puffer_core.cli.main", "train", *args]


def memory_run(
    minutes: float = DEFAULT_MINUTES,
    interval: float = DEFAULT_INTERVAL,
    env: str = ENV,
    train_args: tuple[str, ...] = TRAIN_ARGS,
    progress: Callable[[list[float]], None] | None = None,
) -> dict[str, Any]:
    """Train ``env`` for ``minutes``, sampling every ``interval`` seconds; stop, load, resume.

    Returns:
        ``env``, ``command``, ``minutes``, ``interval``, ``columns`` (``COLUMNS``), ``samples``
        (one list per sample), ``exit_code`` (130: stopped as by Ctrl-C), ``scratch_left``
        (the run's Multiprocessing folders still there), ``resume`` and ``summary``
        (``summarise``).

    Raises:
        RuntimeError: the run ended before its time, or did not stop; its last output says why.
    """
    with tempfile.TemporaryDirectory(prefix="puffer-bench-memory-") as scratch:
        run, log = Path(scratch) / "run", Path(scratch) / "train.log"
        command = _train_command(env, "--out", str(run), *train_args)
        samples = []
        with open(log, "wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            started = time.monotonic()
            while time.monotonic() - started < minutes * 60:
                time.sleep(max(0.0, interval * (len(samples) + 1) - (time.monotonic() - started)))
                if proc.poll() is not None:
                    raise RuntimeError(f"the run ended early ({proc.returncode}): {_tail(log)}")
                samples.append(_sample(started, proc.pid, run))
                if progress is not None:
                    progress(samples[-1])
            proc.send_signal(signal.SIGINT)  # as Ctrl-C: the trainer saves and exits 130
            code = proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        samples.append(_sample(started, proc.pid, run))  # the saved checkpoint; the tree is gone
        left = [
            name for name in os.listdir(tempfile.gettempdir()) if name.startswith(PREFIX) and f"-{proc.pid}-" in name
        ]
        section = {
            "env": env,
            "command": ["puffer", "train", env, "--out", "RUN", *train_args],
            "minutes": minutes,
            "interval": interval,
            "columns": list(COLUMNS),
            "samples": samples,
            "exit_code": code,
            "scratch_left": left,
            "resume": _resume(run, Path(scratch) / "resume.log"),
        }
    section["summary"] = summarise(section)
    return section


def _resume(run: Path, log: Path) -> dict[str, Any]:
    """Load the run's checkpoint (timed), then ``puffer train --resume`` it for ``RESUME_STEPS``
    more steps: does its curve go on from where it was?"""
    from puffer_core import train

    started = time.perf_counter()
    before = train.load(run)
    load_seconds = time.perf_counter() - started
    steps = before.step + RESUME_STEPS
    with open(log, "wb") as out:
        resumed = _train_command("--resume", str(run), "--steps", str(steps), "--json")
        code = subprocess.run(resumed, stdout=out, stderr=subprocess.STDOUT).returncode
    after = train.load(run)
    episodes = (before.curve["episode_count"], after.curve["episode_count"])
    return {
        "load_seconds": round(load_seconds, 3),
        "exit_code": code,
        "step_before": before.step,
        "step_after": after.step,
        "episodes_before": episodes[0],
        "episodes_after": episodes[1],
        "continued": code == 0 and after.step >= steps and episodes[1] > episodes[0],
    }


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no output)"


def summarise(section: dict[str, Any]) -> dict[str, Any]:
    """What the samples say: RSS and checkpoint size at each of ``MARKS`` the run reached, and
    whether each is flat (its greatest in the run's second half within ``FLAT_MB`` or
    ``FLAT_SHARE`` of its greatest between the fifth minute, or a quarter of the run, and the half)."""
    columns = section["columns"]
    rows = [dict(zip(columns, sample)) for sample in section["samples"][:-1]]  # the last: after the run
    if not rows:
        return {}
    marks = {}
    for minute in MARKS:
        reached = [row for row in rows if row["seconds"] <= minute * 60 + section["interval"] / 2]
        if reached and reached[-1]["seconds"] >= minute * 60 - section["interval"] / 2:
            row = reached[-1]
            marks[str(minute)] = {key: row[key] for key in ("rss_mb", "pss_mb", "checkpoint_bytes", "step", "episodes")}
    end = rows[-1]["seconds"]
    settle = min(300.0, end / 4)
    early = [row for row in rows if settle <= row["seconds"] < end / 2]
    late = [row for row in rows if row["seconds"] >= end / 2]
    flat = {}
    for key in ("rss_mb", "pss_mb", "checkpoint_bytes"):
        before, after = max(row[key] for row in early or rows), max(row[key] for row in late)
        slack = FLAT_MB * 2**20 if key == "checkpoint_bytes" else FLAT_MB
        flat[key] = {
            "settled_max": before,
            "late_max": after,
            "flat": after <= max(before * (1 + FLAT_SHARE), before + slack),
        }
    return {"marks": marks, "flat": flat, "steps": rows[-1]["step"], "episodes": rows[-1]["episodes"]}


def render_markdown(section: dict[str, Any]) -> str:
    """The run as Markdown: its command, a row per minute mark, and what resuming it did."""
    summary, resume = section["summary"], section["resume"]
    lines = [
        f"`{' '.join(section['command'])}` for {section['minutes']:g} minutes, sampled every "
        f"{section['interval']:g} s: the process tree's memory (the main process and its workers) and the run's "
        "checkpoint, against the steps and episodes of the run.",
        "",
        "| minute | steps | episodes | RSS (MB) | PSS (MB) | checkpoint (KB) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for minute, mark in summary["marks"].items():
        lines.append(
            f"| {minute} | {mark['step']:,} | {mark['episodes']:,} | {mark['rss_mb']:,.0f} | {mark['pss_mb']:,.0f} "
            f"| {mark['checkpoint_bytes'] / 1024:,.0f} |"
        )
    flat = summary["flat"]
    verdict = ", ".join(
        f"{name} {'flat' if flat[key]['flat'] else 'GROWING'}"
        for key, name in (("rss_mb", "RSS"), ("pss_mb", "PSS"), ("checkpoint_bytes", "checkpoint size"))
    )
    lines += [
        "",
        f"After the first minutes: {verdict} (the greatest value of the run's second half against the greatest "
        f"before it). Stopped as by Ctrl-C (exit {section['exit_code']}), the run left "
        f"{len(section['scratch_left'])} scratch folder(s); its checkpoint loaded in {resume['load_seconds']:.2f} s "
        f"and `--resume` {'went on' if resume['continued'] else 'FAILED to go on'} from step "
        f"{resume['step_before']:,} and {resume['episodes_before']:,} episodes to step {resume['step_after']:,} and "
        f"{resume['episodes_after']:,} episodes.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m puffer_core.bench.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help=f"training time [{DEFAULT_MINUTES:g}]")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds between samples [10]")
    parser.add_argument("--out", default="bench-results/memory", help="the folder of runs [bench-results/memory]")
    parser.add_argument("--json", action="store_true", help="print the stored run as JSON")
    args = parser.parse_args(argv)
    if not args.minutes > 0 or not args.interval > 0:
        parser.error("--minutes and --interval must be positive")

    def show(sample: list[float]) -> None:
        row = dict(zip(COLUMNS, sample))
        print(
            f"{row['seconds']:7.0f} s: RSS {row['rss_mb']:7.1f} MB over {row['processes']} processes, checkpoint "
            f"{row['checkpoint_bytes'] / 1024:8.1f} KB, step {row['step']:,}, episodes {row['episodes']:,}",
            file=sys.stderr,
            flush=True,
        )

    section = memory_run(args.minutes, args.interval, progress=show)
    store_and_show(args.out, "memory", section, args.json, render_markdown)
    ok = section["exit_code"] == 130 and section["resume"]["continued"] and not section["scratch_left"]
    return 0 if ok and all(item["flat"] for item in section["summary"]["flat"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
