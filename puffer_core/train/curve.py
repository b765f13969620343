"""The learning curve of a run: one row per PPO update, every finished episode, and the
files someone looks at (``curve.csv``, ``curve.png``), each written atomically."""

from __future__ import annotations

import csv
import importlib.util
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from puffer_core.atomic import write_atomically
from puffer_core.errors import MissingDependencyError

__all__ = ["Curve", "require_matplotlib"]

#: episodes the "mean return" of a curve row averages over
WINDOW = 20

COLUMNS = (
    "step",
    "seconds",
    "steps_per_second",
    "episodes",
    "mean_return",
    "mean_length",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "learning_rate",
)


def require_matplotlib() -> None:
    """Fail before training, not at its end, when curve.png cannot be drawn."""
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingDependencyError(
            "puffer train draws curve.png with matplotlib, which is missing; pip install 'puffer-core[train]'"
        )


@dataclass
class Curve:
    """``rows``: one dict per update (``COLUMNS``); ``episodes``: (step, return, length) each."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[tuple[int, float, int]] = field(default_factory=list)

    def mean_return(self, last: int = WINDOW) -> float | None:
        """Mean return of the last ``last`` finished episodes (None before the first)."""
        if not self.episodes:
            return None
        return float(np.mean([ret for _, ret, _ in self.episodes[-last:]]))

    def mean_length(self, last: int = WINDOW) -> float | None:
        if not self.episodes:
            return None
        return float(np.mean([length for _, _, length in self.episodes[-last:]]))

    def add_row(self, **values: Any) -> dict[str, Any]:
        row = {column: values.get(column) for column in COLUMNS}
        row["episodes"] = len(self.episodes)
        row["mean_return"] = self.mean_return()
        row["mean_length"] = self.mean_length()
        self.rows.append(row)
        return row

    def to_state(self) -> dict[str, Any]:
        return {"rows": self.rows, "episodes": [list(e) for e in self.episodes]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Curve:
        return cls(list(state.get("rows", [])), [tuple(e) for e in state.get("episodes", [])])

    def csv_bytes(self) -> bytes:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow(
                {k: "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
            )
        return out.getvalue().encode()

    def png_bytes(self, title: str) -> bytes:
        """Episode returns against environment steps: every episode as a faint dot, the mean of
        the last ``WINDOW`` as a line, steps/second on a thin panel below."""
        import matplotlib

        matplotlib.use("Agg")  # no display needed, and never a window
        from matplotlib.figure import Figure

        figure = Figure(figsize=(8, 5.5), dpi=110, layout="constrained")
        top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(4, 1))
        if self.episodes:
            steps, returns, _ = (np.array(column) for column in zip(*self.episodes))
            top.scatter(steps, returns, s=6, alpha=0.25, color="tab:blue", label="episode return")
            window = np.convolve(returns, np.ones(WINDOW), "valid") / WINDOW if len(returns) >= WINDOW else returns
            top.plot(steps[len(steps) - len(window) :], window, color="tab:blue", lw=2, label=f"mean of last {WINDOW}")
            top.legend(loc="lower right")
        else:
            top.text(0.5, 0.5, "no episode finished yet", ha="center", va="center", transform=top.transAxes)
        top.set_ylabel("episode return")
        top.set_title(title)
        top.grid(alpha=0.3)
        if self.rows:
            bottom.plot(
                [r["step"] for r in self.rows], [r["steps_per_second"] or 0 for r in self.rows], color="tab:gray"
            )
        bottom.set_ylabel("steps/s")
        bottom.set_xlabel("environment steps")
        bottom.grid(alpha=0.3)
        out = io.BytesIO()
        figure.savefig(out, format="png")
        return out.getvalue()

    def write(self, directory: Path, title: str) -> None:
        write_atomically(directory / "curve.csv", self.csv_bytes())
        write_atomically(directory / "curve.png", self.png_bytes(title))
