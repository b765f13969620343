"""``curve.png``: a run's episode returns against environment steps, drawn from its bounded
curve (:mod:`puffer_core.train.curve`), and its steps per second below."""

from __future__ import annotations

import io
from typing import Any

import numpy as np

__all__ = ["draw"]


def draw(curve: Any, title: str, window: int) -> bytes:
    """The PNG of ``curve``: each bin's mean return as a line and its least-to-greatest band,
    the last episodes as faint dots with the mean of the last ``window`` of them; steps/second
    on a thin panel below."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed, and never a window
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5.5), dpi=110, layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(4, 1))
    bins = curve.bins.filled()
    if bins:
        ends = np.array([b["end"] for b in bins])
        least, greatest = [b["min_return"] for b in bins], [b["max_return"] for b in bins]
        top.fill_between(ends, least, greatest, step="pre", color="tab:blue", alpha=0.15, label="least to greatest")
        top.plot(ends, [b["mean_return"] for b in bins], color="tab:blue", lw=1.5, label="mean return (all episodes)")
        _recent(top, curve.episodes, window)
        top.legend(loc="lower right")
    else:
        top.text(0.5, 0.5, "no episode finished yet", ha="center", va="center", transform=top.transAxes)
    top.set_ylabel("episode return")
    top.set_title(title)
    top.grid(alpha=0.3)
    if curve.rows:
        bottom.plot([r["step"] for r in curve.rows], [r["steps_per_second"] or 0 for r in curve.rows], color="tab:gray")
    bottom.set_ylabel("steps/s")
    bottom.set_xlabel("environment steps")
    bottom.grid(alpha=0.3)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def _recent(axes: Any, episodes: list[tuple[int, float, int]], window: int) -> None:
    """The last episodes as dots, and the mean of the last ``window`` along them."""
    steps, returns, _ = (np.array(column) for column in zip(*episodes))
    axes.scatter(steps, returns, s=6, alpha=0.25, color="tab:orange", label=f"last {len(returns):,} episodes")
    mean = np.convolve(returns, np.ones(window), "valid") / window if len(returns) >= window else returns
    axes.plot(steps[len(steps) - len(mean) :], mean, color="tab:orange", lw=2, label=f"mean of last {window}")
