"""Expected results (a benchmark): what `puffer train ENV` with nothing else reaches, and how long it takes.

    python -m puffer_core.bench.expected [--env ID ...] [--seeds N] [--out bench-results/expected]

For each of ``ENVS`` (the policy probes, CartPole, Breakout, NetHack) and each seed: PPO with exactly what
``puffer train ENV`` gives a user (the env family's training defaults, ``PPOConfig``'s default step
budget), then uniformly random actions on the same env for ``RANDOM_EPISODES`` episodes. A row holds
the steps, the minutes the training took here, the trained agent's mean return over its last
episodes and the random policy's. The run is stored as ``OUT/<UTC time>.json``; ``python -m
puffer_core.bench.results`` renders ``docs/expected-results.md`` from the newest, so that a user can
tell whether their run is normal.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from puffer_core.bench.learning import random_baseline
from puffer_core.bench.runs import store_and_show

__all__ = ["ENVS", "RANDOM_EPISODES", "WINDOW", "expected_row", "expected_run", "main", "render_markdown"]

#: The envs a newcomer trains first, in the order the docs meet them. Probes 1 to 3 test the value
#: function: every policy has the same return there, so a return says nothing of the run.
ENVS = (
    "classic/probe_4",
    "classic/probe_5",
    "classic/cartpole",
    "atari/breakout",
    "nethack/score",
)
#: The trained agent's figure: the mean return of its last WINDOW finished episodes.
WINDOW = 100
#: Episodes of the random policy averaged for its line.
RANDOM_EPISODES = 100
DEFAULT_SEEDS = (0,)

Progress = Callable[[str], None]


def expected_row(env_id: str, seed: int = 0, *, steps: int | None = None, progress: Progress | None = None) -> dict:
    """One env, one seed: ``puffer train ENV --seed SEED`` (``steps``: another budget, for tests) and a random policy.

    Returns:
        ``env``, ``seed``, ``steps``, ``seconds``, ``steps_per_second``, ``episodes``, ``window`` (the
        episodes averaged: ``WINDOW`` or all when fewer ended), ``trained_mean_return``, ``policy``,
        ``num_envs`` and ``random`` (``bench.learning.random_baseline``).
    """
    from puffer_core.train import plan_run, train_plan  # deferred: torch, an optional extra

    say = progress or (lambda message: None)
    settings: dict[str, Any] = {"seed": seed}
    if steps is not None:
        settings["steps"] = steps
    with tempfile.TemporaryDirectory(prefix="puffer-expected-") as scratch:
        plan = plan_run(env_id, settings=settings, out=Path(scratch) / "run")
        say(f"{env_id}, seed {seed}: training {plan.config.steps:,} steps")
        curve = train_plan(plan)
    returns = [episode[1] for episode in curve.episodes[-WINDOW:]]
    rows = curve.rows
    seconds = rows[-1]["seconds"] if rows else 0.0
    done = rows[-1]["step"] if rows else 0
    say(f"{env_id}, seed {seed}: random policy, {RANDOM_EPISODES} episodes")
    baseline = random_baseline(env_id, RANDOM_EPISODES, plan.env_kwargs, seed=seed)
    return {
        "env": env_id,
        "seed": seed,
        "steps": done,
        "seconds": round(seconds, 1),
        "steps_per_second": round(done / seconds, 1) if seconds else None,
        "episodes": curve.episode_count,
        "window": len(returns),
        "trained_mean_return": round(float(np.mean(returns)), 3) if returns else None,
        "policy": plan.config.policy,
        "num_envs": plan.config.num_envs,
        "random": baseline,
    }


def expected_run(
    envs: tuple[str, ...] = ENVS,
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    *,
    steps: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The section: one ``expected_row`` per env and seed, and the seeds' spread per env."""
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)!r}")
    rows = [expected_row(env_id, seed, steps=steps, progress=progress) for env_id in envs for seed in seeds]
    return {"envs": list(envs), "seeds": list(seeds), "window": WINDOW, "rows": rows}


def _spread(values: list[float]) -> str:
    """``mean`` for one value, ``mean ± std`` for several."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} ± {np.std(values):.2f}"


def render_markdown(section: dict[str, Any]) -> str:
    """The section as a Markdown table: one line per env, its seeds summed up."""
    seeds = section["seeds"]
    lines = [
        "| env | steps | minutes here | trained: mean return | random policy: mean return | policy, envs |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for env_id in section["envs"]:
        rows = [row for row in section["rows"] if row["env"] == env_id]
        if not rows:
            continue
        trained = [row["trained_mean_return"] for row in rows if row["trained_mean_return"] is not None]
        random = [row["random"]["mean_return"] for row in rows]
        minutes = np.mean([row["seconds"] for row in rows]) / 60
        window = min(row["window"] for row in rows)
        trained_text = f"{_spread(trained)} (last {window} episodes)" if trained else "no episode ended"
        lines.append(
            f"| `{env_id}` | {rows[0]['steps']:,} | {minutes:.1f} | {trained_text} | {_spread(random)} | "
            f"{rows[0]['policy']}, {rows[0]['num_envs']} |"
        )
    count = (
        f"{len(seeds)} seeds ({', '.join(map(str, seeds))}): mean ± standard deviation"
        if len(seeds) > 1
        else (f"seed {seeds[0]}")
    )
    return "\n".join(lines) + f"\n\nEach env trained with {count}.\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m puffer_core.bench.expected", description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", dest="envs", metavar="ID", help="an env to run (repeatable) [all]")
    parser.add_argument("--seeds", type=int, default=len(DEFAULT_SEEDS), help="seeds 0 to N-1 per env [1]")
    parser.add_argument("--out", default="bench-results/expected", help="the folder of runs [bench-results/expected]")
    parser.add_argument("--json", action="store_true", help="print the stored run as JSON")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    envs = tuple(args.envs) if args.envs else ENVS
    section = expected_run(envs, tuple(range(args.seeds)), progress=lambda m: print(m, file=sys.stderr, flush=True))
    store_and_show(args.out, "expected", section, args.json, render_markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
