"""The harness of a plugin's ``benchmarks/overhead.py``: its emulated env against a raw loop.

A plugin's overhead script builds its two envs (the raw one as a user would write it, and
``puffer_core.make``'s) on the same seed and checks they play the same game; this module
times them on the same random actions with ``puffer_core.bench.emulation.interleaved``
(CPU time of this thread, resets left out, short alternating rounds), repeats that, and
prints each repeat and the median step-time ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from puffer_core.vector.timing import interleaved

__all__ = ["RefuseZeroCopy", "overhead_parser", "report_repeats", "time_against_raw"]


class RefuseZeroCopy(gymnasium.Wrapper):
    """Declines the emulator's offer of its buffer, so the emulator copies every observation."""

    def puffer_bind_observation(self, views: Any) -> bool:
        return False


def overhead_parser(description: str) -> argparse.ArgumentParser:
    """The options every overhead script takes: ``--steps``, ``--rounds``, ``--repeats``, ``--copying``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=20_000, help="steps of each loop per repeat [20000]")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds per repeat [10]")
    parser.add_argument("--repeats", type=int, default=5, help="repeats, each on its own seed [5]")
    parser.add_argument("--copying", action="store_true", help="refuse the zero-copy binding (RefuseZeroCopy)")
    return parser


def time_against_raw(
    raw: Any, emulated: Any, steps: int, rounds: int, seed: int, raw_reset: Callable[[], Any] | None = None
) -> dict[str, float]:
    """Time ``raw.step`` against ``emulated.step_in_place`` on the same random actions, then close both.

    Args:
        raw: The raw env (a Discrete action space), already reset on ``seed``.
        emulated: Its emulated counterpart, already reset on ``seed``.
        steps: Steps of each loop.
        rounds: Alternating rounds the steps are split into.
        seed: Seeds the actions.
        raw_reset: How the raw loop resets after an episode (default ``raw.reset``).

    Returns:
        ``raw_sps``, ``emulated_sps`` and ``ratio``, the median of the rounds' step-time ratios.
    """
    rng = np.random.default_rng(seed)
    raw_actions = [int(a) for a in rng.integers(0, raw.action_space.n, min(steps, 10_000))]
    flat_actions = [np.int64(a) for a in raw_actions]  # numpy values, as a vector env holds them
    try:
        return interleaved(
            (raw.step, raw_reset or raw.reset, raw_actions),
            (emulated.step_in_place, emulated.reset, flat_actions),
            steps,
            rounds,
        )
    finally:
        raw.close()
        emulated.close()


def report_repeats(variants: dict[str, Callable[[int], dict]], repeats: int, label: str) -> dict[str, float]:
    """Run every variant once per repeat (the repeat's index is its seed), print each result and
    the median ratio per variant; return those medians.

    Variants alternate within a repeat, so drift on the machine hits them alike.
    """
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    for repeat in range(repeats):
        for name, measure in variants.items():
            started = time.perf_counter()
            result = measure(repeat)
            ratios[name].append(result["ratio"])
            print(
                f"repeat {repeat} {name}: raw {result['raw_sps']:,.0f} SPS, emulated {result['emulated_sps']:,.0f} "
                f"SPS, ratio {result['ratio']:.3f} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    medians = {name: statistics.median(values) for name, values in ratios.items()}
    for name, median in medians.items():
        print(f"{label} ({name}) emulated/raw step time: median {median:.3f}")
    return medians
