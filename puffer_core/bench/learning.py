"""Learning benchmark: PPO on a hard env for a fixed time, against a random policy in the same run.

``learning_run(minutes=30)`` trains ``puffer_core.train.ppo`` on ``LEARNING_ENV`` with the env
family's training defaults (its plugin's ``EnvSpec.train_defaults`` and ``train_kwargs``) and
``LEARNING_SETTINGS`` on top, for ``minutes`` of training, then plays uniformly random actions
on the same env with the same kwargs for at least ``RANDOM_EPISODES`` episodes. The row holds
both means, their ratio against ``TARGET_RATIO`` (the trained agent's last ``WINDOW`` episodes
against the random policy's), the training's steps/second and its curve. With ``keep`` it also
keeps the curve plot (``curve.png``) and a recording of the trained policy (``<env>.cast``).
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
    chosen = {**LEARNING_SETTINGS, **(settings or {}), "max_seconds": minutes * 60}
    chosen.setdefault("steps", 10**12)  # the clock ends the run
    say(f"learning {env_id}: training for {minutes:g} min", 0, 2)
    plan, curve, files = _train(env_id, chosen, env_kwargs, keep, record_steps, say)
    say(f"learning {env_id}: random policy, {random_episodes} episodes", 1, 2)
    row = _row(plan, minutes, curve, random_baseline(env_id, random_episodes, plan.env_kwargs))
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
        "episodes": len(curve.episodes),
        "window": WINDOW,
        "trained_mean_return": trained,
        "random": baseline,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "reached": ratio is not None and ratio >= TARGET_RATIO,
        "curve": _curve_points(rows),
    }


def render_markdown(row: dict[str, Any]) -> str:
    """The learning row as a short section of bench.md."""
    settings = row["settings"]
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
    trained = "–" if row["trained_mean_return"] is None else f"{row['trained_mean_return']:.1f}"
    ratio = "–" if row["ratio"] is None else f"{row['ratio']:.2f}×"
    verdict = "reached" if row["reached"] else "not reached"
    lines = [
        f"### Learning: `{row['env']}` in {row['minutes']:g} minutes",
        "",
        f"PPO with the env family's training defaults ({shown}; observation keys "
        f"{row['env_kwargs'].get('observation_keys', 'default')}) against uniformly random actions on the "
        "same env, in the same run.",
        "",
        "| policy | episodes | mean return | steps | steps/s |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| PPO, last {row['window']} episodes of training | {row['episodes']:,} | {trained} | {row['steps']:,} "
        f"| {row['steps_per_second'] or 0:,.0f} |",
        f"| random | {row['random']['episodes']:,} | {row['random']['mean_return']:.1f} | {row['random']['steps']:,} "
        f"| {row['random']['steps_per_second']:,.0f} |",
        "",
        f"Trained over random: {ratio} (target {row['target_ratio']:g}×: {verdict}). One training run, seed "
        f"{settings.get('seed', 0)}, on the run's commit: one sample of a ratio that differs from seed to seed.",
    ]
    curve, recording = (_page_link(row.get("files", {}).get(key)) for key in ("curve", "recording"))
    if curve:
        lines += ["", f"![The learning curve of this run]({curve})"]
    if recording:
        lines += ["", f"The trained agent playing one game: [{Path(recording).name}]({recording}) (asciinema)."]
    return "\n".join(lines) + "\n"


def _page_link(path: str | None) -> str | None:
    """``path`` relative to the docs site (a file the bench kept under ``docs/``), else None."""
    if not path:
        return None
    parts = Path(path).parts
    return "/".join(parts[1:]) if len(parts) > 1 and parts[0] == "docs" else None
