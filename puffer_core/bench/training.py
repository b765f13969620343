"""Training benchmark: `puffer train` against Stable-Baselines3, and what training costs.

* **Time to solve CartPole**: wall-clock seconds until the mean return of the last 20
  episodes reaches 475, for ``puffer_core.train.ppo`` with the settings below and for
  SB3's ``PPO("MlpPolicy", env)`` with its default hyperparameters on gymnasium's
  ``CartPole-v1`` (one env, as SB3's defaults have it), the same seeds, interleaved, in one
  run. Each trial runs in a fresh interpreter and is timed from the start of training (so
  neither pays for importing torch), with torch's default threads for SB3 and the
  trainer's own choice for Puffer.
* **Training steps/second** on envs with 2 workers, against the same vector env stepped
  with random actions (env-only steps/second, ``puffer_core.vector.timing.time_async``).

The learning section (PPO on NetHack over seeds against a random policy) is a run of its own:
``puffer_core.bench.learning``.

``python -m puffer_core.bench.training solve --trainer puffer|sb3 --seed S`` runs one trial
and prints its JSON (what the benchmark spawns).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from puffer_core import vector
from puffer_core.env.environments import unavailable_reason
from puffer_core.env.factory import has_native_batches
from puffer_core.vector.timing import time_async

__all__ = ["CARTPOLE_SETTINGS", "SOLVED", "run_training", "solve_trial", "training_throughput"]

#: the mean return over the last 20 episodes that counts as solving CartPole-v1
SOLVED = 475.0
WINDOW = 20
#: `puffer train classic/cartpole --steps 150000` (the trainer's defaults otherwise)
CARTPOLE_SETTINGS: dict[str, Any] = {"steps": 150_000}
SB3_MAX_STEPS = 500_000

Progress = Callable[[str, int, int], None]


def _solve_puffer(seed: int) -> dict[str, Any]:
    from puffer_core.train import ppo  # deferred: torch, an optional extra (and before the clock starts)

    started = time.perf_counter()
    solved: dict[str, Any] = {}

    def check(row: dict[str, Any]) -> None:
        if not solved and row["mean_return"] is not None and row["mean_return"] >= SOLVED:
            solved.update(step=row["step"], seconds=time.perf_counter() - started)

    ppo("classic/cartpole", seed=seed, on_update=check, **CARTPOLE_SETTINGS)
    return solved


def _solve_sb3(seed: int) -> dict[str, Any]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class Solved(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.result: dict[str, Any] = {}

        def _on_step(self) -> bool:
            returns = [info["r"] for info in self.model.ep_info_buffer][-WINDOW:]
            if len(returns) >= WINDOW and np.mean(returns) >= SOLVED:
                self.result = {"step": self.num_timesteps, "seconds": time.perf_counter() - started}
                return False
            return True

    env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
    started = time.perf_counter()  # the model's construction counts, as ppo()'s env and policy set-up does
    model = PPO("MlpPolicy", env, seed=seed, device="cpu")
    callback = Solved()
    model.learn(SB3_MAX_STEPS, callback=callback)
    return callback.result


def solve_trial(trainer: str, seed: int) -> dict[str, Any]:
    """One trial in this process: {"trainer", "seed", "solved", "step", "seconds"}."""
    result = _solve_puffer(seed) if trainer == "puffer" else _solve_sb3(seed)
    return {"trainer": trainer, "seed": seed, "solved": bool(result), **result}


def _spawn_trial(trainer: str, seed: int, timeout: float) -> dict[str, Any]:
    args = [sys.executable, "-m", "puffer_core.bench.training", "solve", "--trainer", trainer, "--seed", str(seed)]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"trainer": trainer, "seed": seed, "solved": False, "error": f"no result within {timeout:g} s"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"trainer": trainer, "seed": seed, "solved": False, "error": tail[:300]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def time_to_solve(seeds: tuple[int, ...] = (0, 1, 2), progress: Progress | None = None, timeout: float = 900) -> dict:
    """Interleaved trials of both trainers; medians over the seeds and their ratio."""
    trials: list[dict[str, Any]] = []
    total = 2 * len(seeds)
    for seed in seeds:
        for trainer in ("puffer", "sb3"):
            if progress is not None:
                progress(f"time to solve CartPole: {trainer}, seed {seed}", len(trials), total)
            trials.append(_spawn_trial(trainer, seed, timeout))
    out: dict[str, Any] = {"trials": trials, "settings": CARTPOLE_SETTINGS, "solved_at": SOLVED}
    for trainer in ("puffer", "sb3"):
        times = [t["seconds"] for t in trials if t["trainer"] == trainer and t.get("solved")]
        out[f"{trainer}_median_seconds"] = float(np.median(times)) if len(times) == len(seeds) else None
    if out["puffer_median_seconds"] and out["sb3_median_seconds"]:
        out["ratio"] = round(out["puffer_median_seconds"] / out["sb3_median_seconds"], 3)
    else:
        out["ratio"] = None
    return out


def training_throughput(
    env_id: str, num_envs: int = 8, workers: int = 2, updates: int = 3, seed: int = 0, native: bool = False
) -> dict:
    """PPO's steps/second on ``env_id`` (CleanRL's Atari rollout length, 2 workers) against the
    same vector env stepped with random actions, measured for as long as training took; with
    ``native``, the workers step the env's native batches."""
    from puffer_core.train import ppo  # deferred: torch, an optional extra

    rollout = 128
    curve = ppo(
        env_id,
        steps=num_envs * rollout * updates,
        num_envs=num_envs,
        num_workers=workers,
        backend="multiprocessing",
        rollout_steps=rollout,
        learning_rate=2.5e-4,
        seed=seed,
        native=native,
    )
    train_sps = float(np.median([row["steps_per_second"] for row in curve.rows]))
    with vector.make(
        env_id, num_envs=num_envs, num_workers=workers, backend="multiprocessing", seed=seed,
        vector_kwargs={"native": True} if native else None,
    ) as envs:  # fmt: skip
        seconds = min(10.0, max(2.0, sum(row["seconds"] for row in curve.rows[-1:])))
        env_sps = time_async(envs, seconds, 1.0, envs.batch_size, envs.single_action_space, seed)
    return {
        "env": env_id,
        "num_envs": num_envs,
        "num_workers": workers,
        "native": native,
        "training_sps": round(train_sps, 1),
        "env_only_sps": round(env_sps, 1),
        "ratio": round(train_sps / env_sps, 3),
    }


def run_training(
    envs: tuple[str, ...] = ("nethack/score", "atari/breakout"),
    seeds: tuple[int, ...] = (0, 1, 2),
    progress: Progress | None = None,
) -> dict:
    """The training section of ``nox -s bench``: time to solve CartPole and training throughput."""
    document: dict[str, Any] = {"cartpole": time_to_solve(seeds, progress), "throughput": [], "skipped": []}
    for env_id in envs:
        reason = unavailable_reason(env_id)
        if reason:
            document["skipped"].append(reason)
            continue
        if progress is not None:
            progress(f"training throughput: {env_id}", 0, 1)
        document["throughput"].append(training_throughput(env_id))
        if has_native_batches(env_id):  # Breakout: its native batches too
            document["throughput"].append(training_throughput(env_id, native=True))
    return document


def _seconds(value: float | None) -> str:
    return "– (not solved)" if value is None else f"{value:.1f} s"


def render_markdown(document: dict) -> str:
    """The training section of bench.md."""
    cartpole = document["cartpole"]
    lines = [
        "## Training",
        "",
        f"Time to solve CartPole-v1 (mean return of the last {WINDOW} episodes ≥ {SOLVED:g}), medians over "
        f"seeds {', '.join(str(t['seed']) for t in cartpole['trials'] if t['trainer'] == 'puffer')}: "
        f"`puffer train` ({', '.join(f'{k}={v}' for k, v in cartpole['settings'].items())}) against SB3's PPO "
        "with default hyperparameters (one env), each timed from the start of training.",
        "",
        "| trainer | seed | solved at step | seconds |",
        "| --- | ---: | ---: | ---: |",
    ]
    for trial in cartpole["trials"]:
        step = f"{trial['step']:,}" if trial.get("solved") else trial.get("error", "not solved")
        seconds = f"{trial['seconds']:.1f}" if trial.get("solved") else "–"
        lines.append(f"| {trial['trainer']} | {trial['seed']} | {step} | {seconds} |")
    ratio = "–" if cartpole["ratio"] is None else f"{cartpole['ratio']:.2f}×"
    puffer, sb3 = (_seconds(cartpole[f"{name}_median_seconds"]) for name in ("puffer", "sb3"))
    lines += [
        "",
        f"Median: puffer {puffer}, SB3 {sb3}: {ratio}.",
        "",
    ]
    if document["throughput"]:
        lines += [
            "| env | envs | workers | training steps/s | env-only steps/s | ratio |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in document["throughput"]:
            env = row["env"] + (", native batches" if row.get("native") else "")
            lines.append(
                f"| {env} | {row['num_envs']} | {row['num_workers']} | {row['training_sps']:,.0f} | "
                f"{row['env_only_sps']:,.0f} | {row['ratio']:.2f}× |"
            )
    lines += [f"- {reason}" for reason in document.get("skipped", [])]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m puffer_core.bench.training", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    solve = sub.add_parser("solve", help="one time-to-solve trial; prints JSON")
    solve.add_argument("--trainer", choices=("puffer", "sb3"), required=True)
    solve.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(solve_trial(args.trainer, args.seed)))


if __name__ == "__main__":
    main()
