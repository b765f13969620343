"""The learning row of `puffer bench --training` alone: PPO on nethack/score for MINUTES against
a random policy, without the CartPole and throughput rows around it. Writes OUT/row.json and keeps
the curve plot and a recording in OUT/keep/ (what `nox -s bench` keeps under docs/assets/learning/).

    python experiments/nethack_learning/learning_row.py 30 OUT ['{"learning_rate": 3e-4}']
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from puffer_core.bench.learning import learning_run


def progress(name: str, done: int, total: int) -> None:
    print(name, flush=True)


if __name__ == "__main__":  # the workers of a forkserver import this module: keep the run under this line
    minutes, out = float(sys.argv[1]), Path(sys.argv[2])
    settings = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    row = learning_run(minutes=minutes, settings=settings, keep=out / "keep", progress=progress)
    (out / "row.json").write_text(json.dumps(row, indent=1) + "\n")
    print("trained", row["trained_mean_return"], "random", row["random"]["mean_return"], "ratio", row["ratio"])
