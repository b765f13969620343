"""Learning benchmark: PPO on a hard env for a fixed time, against a random policy, over seeds.

``learning_run(minutes=30, seed=s)`` trains ``puffer_core.train.ppo`` on ``LEARNING_ENV`` with the
env family's training defaults (its plugin's ``EnvSpec.train_defaults`` and ``train_kwargs``),
``LEARNING_SETTINGS`` on top and seed ``s``, for ``minutes`` of training, then plays uniformly
random actions on the same env with the same kwargs and seed for at least ``RANDOM_EPISODES``
episodes. Its row holds both means, their ratio (the trained agent's last ``WINDOW`` episodes
against the random policy's), the training's steps/second and its curve.

``learning_runs`` makes that row for each of ``DEFAULT_SEEDS`` and sums them up as the mean and
standard deviation of the ratio against ``TARGET_RATIO``: one seed's ratio is one sample of a
figure that moves from seed to seed. With ``keep`` it keeps the first seed's curve plot
(``curve.png``) and a recording of its trained policy (``<env>.cast``).

``puffer bench --learning DIR`` (what ``nox -s bench`` runs) stores the section as one dated JSON
file in ``bench-results/learning/``; ``puffer_core.bench.results`` renders the newest into
``docs/performance.md``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from puffer_core.atomic import private_directory
from puffer_core.vector.random_run import run_random

__all__ = [
    "LEARNING_ENV",
    "LEARNING_SETTINGS",
    "RANDOM_EPISODES",
    "TARGET_RATIO",
    "WINDOW",
    "learning_run",
    "learning_runs",
    "random_baseline",
    "render_markdown",
]

#: The env the standard run trains on; docs/training.md ("NetHack") says why this task.
LEARNING_ENV = "nethack/score"
#: The standard run's settings on top of the env family's defaults: the one place to change
#: anything the benchmark trains with. Empty: the benchmark trains with what `puffer train`
#: gives a user (the NetHack plugin's defaults, a recurrent policy among them).
LEARNING_SETTINGS: dict[str, Any] = {}
#: The standard run's training time, and the most a run may take.
DEFAULT_MINUTES = 30.0
MAX_MINUTES = 30.0
#: The standard run's seeds: the fewest that give a spread, at half an hour each.
DEFAULT_SEEDS = (0, 1, 2)
#: The trained agent's mean over its last WINDOW episodes must reach TARGET_RATIO x the random policy's.
TARGET_RATIO = 3.0
WINDOW = 100
RANDOM_EPISODES = 200
#: The curve kept in the run's JSON: at most this many points.
CURVE_POINTS = 120

Progress = Callable[[str, int, int], None]


def random_baseline(
    env_id: str, episodes: int = RANDOM_EPISODES, env_kwargs: dict[str, Any] | None = None, seed: int = 0
) -> dict[str, Any]:
    """Uniformly random actions until ``episodes`` episodes end: their mean return and steps/second.

    Eight envs on two workers, asynchronous batches of four; the first ``episodes`` to end count.
    """
    run = run_random(
        env_id,
        steps=None,
        episodes=episodes,
        num_envs=8,
        num_workers=2,
        batch_size=4,
        backend="multiprocessing",
        seed=seed,
        **(env_kwargs or {}),
    )
    returns = run.episode_returns[:episodes]
    return {
        "episodes": len(returns),
        "mean_return": round(float(np.mean(returns)), 3),
        "std_return": round(float(np.std(returns)), 3),
        "steps": run.steps,
        "steps_per_second": round(run.sps, 1),
    }


def _curve_points(rows: list[dict[str, Any]]) -> list[list[float | None]]:
    """``[step, seconds, mean return]`` of at most CURVE_POINTS updates, evenly spread."""
    if not rows:
        return []
    picks = sorted({round(i) for i in np.linspace(0, len(rows) - 1, min(CURVE_POINTS, len(rows)))})
    return [[rows[i]["step"], rows[i]["seconds"], rows[i]["mean_return"]] for i in picks]


def _keep_files(run_dir: Path, keep: Path, env_id: str, record_steps: int) -> dict[str, str]:
    """The curve plot and a recording of one episode of the trained policy, in ``keep``."""
    from puffer_core.train import evaluate  # deferred: torch, an optional extra

    private_directory(keep)
    shutil.copyfile(run_dir / "curve.png", keep / "curve.png")
    cast = keep / f"{env_id.replace('/', '-')}.cast"
    # Sampled, as in training (a greedy NetHack policy can walk into a wall for good), and
    # capped so the recording stays a few megabytes.
    evaluate(run_dir, 1, greedy=False, record=cast, env_kwargs={"max_episode_steps": record_steps}, overwrite=True)
    return {"curve": str(keep / "curve.png"), "recording": str(cast)}


def learning_run(
    env_id: str = LEARNING_ENV,
    minutes: float = DEFAULT_MINUTES,
    *,
    seed: int = 0,
    settings: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    random_episodes: int = RANDOM_EPISODES,
    keep: str | Path | None = None,
    record_steps: int = 1000,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train on ``env_id`` for ``minutes`` and play a random policy on it; the benchmark's row.

    Args:
        env_id: The env to learn.
        minutes: Training time (the trainer's ``max_seconds``), at most ``MAX_MINUTES``.
        seed: The training's seed (over ``settings``'), and the random policy's.
        settings: PPO settings on top of the env's training defaults (default ``LEARNING_SETTINGS``).
        env_kwargs: Creator kwargs on top of the env's ``train_kwargs`` (the random policy's too).
        random_episodes: Episodes of the random policy to average.
        keep: A folder to keep the curve plot and a recording of the trained policy in.
        record_steps: The recorded episode's step limit.
        progress: ``progress(name, done, total)``, called as the run goes.

    Returns:
        ``env``, ``minutes``, ``settings`` and ``env_kwargs`` as trained, ``steps``,
        ``seconds``, ``steps_per_second``, ``episodes``, ``window``, ``trained_mean_return``
        (the last ``window`` episodes), ``random`` (``random_baseline``), ``ratio``,
        ``target_ratio``, ``reached``, ``curve`` and, with ``keep``, ``files``.
    """
    if not 0 < minutes <= MAX_MINUTES:
        raise ValueError(f"minutes must be in (0, {MAX_MINUTES:g}], got {minutes!r}")
    if keep is not None:
        private_directory(keep)  # refused now, not after the training
    say = progress or (lambda name, done, total: None)
    chosen = {**LEARNING_SETTINGS, **(settings or {}), "max_seconds": minutes * 60, "seed": seed}
    chosen.setdefault("steps", 10**12)  # the clock ends the run
    say(f"learning {env_id}, seed {seed}: training for {minutes:g} min", 0, 2)
    plan, curve, files = _train(env_id, chosen, env_kwargs, keep, record_steps, say)
    say(f"learning {env_id}, seed {seed}: random policy, {random_episodes} episodes", 1, 2)
    row = _row(plan, minutes, curve, random_baseline(env_id, random_episodes, plan.env_kwargs, seed=seed))
    if files is not None:
        row["files"] = files
    return row


def _train(
    env_id: str,
    settings: dict[str, Any],
    env_kwargs: dict[str, Any] | None,
    keep: str | Path | None,
    record_steps: int,
    say: Progress,
) -> tuple[Any, Any, dict[str, str] | None]:
    """(the run's plan, its curve, the files kept): PPO on ``env_id`` in a scratch directory."""
    from puffer_core.train import plan_run, train_plan  # deferred: torch, an optional extra

    with tempfile.TemporaryDirectory(prefix="puffer-learning-") as scratch:
        run_dir = Path(scratch) / "run"
        plan = plan_run(env_id, settings=settings, env_kwargs=env_kwargs, out=run_dir)

        def report(row: dict[str, Any]) -> None:
            say(f"learning {env_id}: step {row['step']:,}, mean return {row['mean_return']}", 0, 2)

        curve = train_plan(plan, on_update=report)
        files = _keep_files(run_dir, Path(keep), env_id, record_steps) if keep is not None else None
    return plan, curve, files


def _row(plan: Any, minutes: float, curve: Any, baseline: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's row: the run as trained, the trained agent's last episodes against the random policy's."""
    returns = [episode[1] for episode in curve.episodes[-WINDOW:]]
    trained = round(float(np.mean(returns)), 3) if returns else None
    ratio = None if trained is None or baseline["mean_return"] <= 0 else round(trained / baseline["mean_return"], 3)
    rows = curve.rows
    seconds = rows[-1]["seconds"] if rows else 0.0
    steps = rows[-1]["step"] if rows else 0  # the trainer's count when it stopped (and saved)
    return {
        "env": plan.env_name,
        "minutes": minutes,
        "settings": plan.config.to_dict(),
        "env_kwargs": {key: list(v) if isinstance(v, tuple) else v for key, v in plan.env_kwargs.items()},
        "steps": steps,
        "seconds": seconds,
        "steps_per_second": round(steps / seconds, 1) if seconds else None,
        "episodes": curve.episode_count,
        "window": WINDOW,
        "trained_mean_return": trained,
        "random": baseline,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "reached": ratio is not None and ratio >= TARGET_RATIO,
        "curve": _curve_points(rows),
    }


def learning_runs(
    env_id: str = LEARNING_ENV,
    minutes: float = DEFAULT_MINUTES,
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    *,
    keep: str | Path | None = None,
    progress: Progress | None = None,
    **run_kwargs: Any,
) -> dict[str, Any]:
    """``learning_run`` once per seed, and their spread: the benchmark's learning section.

    Args:
        env_id, minutes: As ``learning_run``'s.
        seeds: One training run (and random baseline) each, in this order.
        keep: A folder for the first seed's curve plot and recording.
        progress: ``progress(name, done, total)``, called as the runs go.
        run_kwargs: ``learning_run``'s other keywords, for every seed.

    Returns:
        ``env``, ``minutes``, ``runs`` (one ``learning_run`` row per seed), ``ratio_mean``,
        ``ratio_std`` (population), ``trained_mean_return`` and ``random_mean_return`` (means over
        the seeds), ``target_ratio``, ``reached`` (the mean ratio against the target) and, with
        ``keep``, ``files`` (the first seed's).
    """
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)!r}")
    if keep is not None:
        private_directory(keep)  # refused now, not after the first training
    say = progress or (lambda name, done, total: None)
    runs = []
    for i, seed in enumerate(seeds):

        def report(name: str, done: int, total: int, i: int = i) -> None:
            say(f"[{i + 1}/{len(seeds)}] {name}", 2 * i + done, 2 * len(seeds))

        runs.append(
            learning_run(env_id, minutes, seed=seed, keep=keep if i == 0 else None, progress=report, **run_kwargs)
        )
    return _summary(env_id, minutes, runs)


def _summary(env_id: str, minutes: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The learning section: the rows of each seed and the mean and spread of their ratios."""
    ratios = [run["ratio"] for run in runs if run["ratio"] is not None]
    trained = [run["trained_mean_return"] for run in runs if run["trained_mean_return"] is not None]
    ratio_mean = round(float(np.mean(ratios)), 3) if ratios else None
    section = {
        "env": env_id,
        "minutes": minutes,
        "runs": [{key: value for key, value in run.items() if key != "files"} for run in runs],
        "ratio_mean": ratio_mean,
        "ratio_std": round(float(np.std(ratios)), 3) if ratios else None,
        "trained_mean_return": round(float(np.mean(trained)), 3) if trained else None,
        "random_mean_return": round(float(np.mean([run["random"]["mean_return"] for run in runs])), 3),
        "target_ratio": TARGET_RATIO,
        # Every seed must have a ratio: a seed without one (no episode ended) is not a pass.
        "reached": len(ratios) == len(runs) and ratio_mean is not None and ratio_mean >= TARGET_RATIO,
    }
    if "files" in runs[0]:
        section["files"] = runs[0]["files"]
    return section


def render_markdown(section: dict[str, Any]) -> str:
    """The learning section (``learning_runs``) as Markdown: one row per seed, then the mean ± std."""
    runs = section["runs"]
    settings = runs[0]["settings"]
    shown = ", ".join(
        f"{key}={settings[key]}"
        for key in (
            "policy",
            "num_envs",
            "rollout_steps",
            "update_epochs",
            "learning_rate",
            "gamma",
            "ent_coef",
            "hidden_size",
            "reward_scale",
        )
        if key in settings
    )
    window = runs[0]["window"]
    lines = [
        f"### Learning: `{section['env']}` in {section['minutes']:g} minutes, {len(runs)} "
        f"seed{'' if len(runs) == 1 else 's'}",
        "",
        f"PPO with the env family's training defaults ({shown}; observation keys "
        f"{runs[0]['env_kwargs'].get('observation_keys', 'default')}) against uniformly random actions on the "
        f"same env with the same seed. PPO's return is the mean of its last {window} training episodes; the "
        f"random policy's, of its first {runs[0]['random']['episodes']:,}.",
        "",
        "| seed | PPO return | random return | PPO over random | PPO steps | PPO steps/s | PPO episodes |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        trained = "–" if run["trained_mean_return"] is None else f"{run['trained_mean_return']:.1f}"
        ratio = "–" if run["ratio"] is None else f"{run['ratio']:.2f}×"
        lines.append(
            f"| {run['settings'].get('seed', 0)} | {trained} | {run['random']['mean_return']:.1f} | {ratio} "
            f"| {run['steps']:,} | {run['steps_per_second'] or 0:,.0f} | {run['episodes']:,} |"
        )
    if section["ratio_mean"] is None:
        summary = "no seed ended an episode, so there is no ratio"
    else:
        summary = f"**{section['ratio_mean']:.2f}× ± {section['ratio_std']:.2f}** (mean ± standard deviation)"
    verdict = "reached" if section["reached"] else "not reached"
    lines += ["", f"Trained over random: {summary} (target {section['target_ratio']:g}×: {verdict})."]
    files = section.get("files", {})
    curve, recording = (_page_link(files.get(key)) for key in ("curve", "recording"))
    first = runs[0]["settings"].get("seed", 0)
    if curve:
        lines += ["", f"![The learning curve of seed {first}]({curve})"]
    if recording:
        lines += [
            "",
            f"Seed {first}'s trained agent playing one game: [{Path(recording).name}]({recording}) (asciinema).",
        ]
    return "\n".join(lines) + "\n"


def _page_link(path: str | None) -> str | None:
    """``path`` relative to the docs site (a file the bench kept under ``docs/``), else None."""
    if not path:
        return None
    parts = Path(path).parts
    return "/".join(parts[1:]) if len(parts) > 1 and parts[0] == "docs" else None
