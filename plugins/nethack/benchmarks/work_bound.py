"""The most any vector env can reach for NetHack here, from the CPU work a step costs.

    python plugins/nethack/benchmarks/work_bound.py [--num-envs 8] [--batch-size 4] [--seconds 3] [--rounds 2] [--json]

A vector env's steps cost CPU in two places: the games' own steps, and the main process's
work per batch (``recv``, the caller's code, ``send``), which no worker can take over. On C
cores no setting can pass ``C / (step + per_batch / batch_size)`` steps/s, however well
its work is spread. Measured on ``nethack/score`` with random actions, resets included:

* ``step``: seconds per step when C processes each step ``num_envs / C`` games in turn
  (emulated, through a Serial vector env, as a worker steps them), all at once: the
  ceiling row of ``puffer bench``, as CPU seconds per step.
* ``per_batch``: seconds per ``recv``/``send`` pair of the best Multiprocessing setting on
  few cores (1 worker + the main process's share, async batches), with hollow games: the
  same spaces, wrappers and zero-copy buffers, but a step that returns the last
  observation without running NetHack. The main process is then busy with its per-batch
  work alone; the hollow steps of its own share are timed apart and left out.
* the bound over a raw single-game loop (what the issue's target is a multiple of), next
  to that setting on real games, all in the same run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time

import gymnasium
import numpy as np

from puffer_core import make_raw, vector
from puffer_core.emulation import GymnasiumEmulator
from puffer_core.postprocess import EpisodeStats

ENV_ID = "nethack/score"


class Hollow(gymnasium.Wrapper):
    """The game as the plugin makes it, but a step only hands back the reset observation."""

    def reset(self, **kwargs):
        self._last = self.env.reset(**kwargs)[0]
        return self._last, {}

    def step(self, action):
        return self._last, 0.0, False, False, {}


def hollow() -> Hollow:
    return Hollow(make_raw(ENV_ID))


def raw_loop(seconds: float) -> float:
    """Steps/s of one raw game (as ``puffer bench``'s raw row)."""
    env = make_raw(ENV_ID)
    actions = [int(a) for a in np.random.default_rng(0).integers(0, env.action_space.n, 4096)]
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(actions[steps & 4095])
        steps += 1
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def batches(envs, seconds: float) -> tuple[float, int]:
    """(seconds, batches) of recv/send pairs over about ``seconds``, after a short warm-up."""
    rng = np.random.default_rng(0)
    actions = rng.integers(0, envs.single_action_space.n, (64, envs.batch_size))
    envs.async_reset(0)
    for i in range(200):
        envs.recv()
        envs.send(actions[i & 63])
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.recv()
        envs.send(actions[n & 63])
        n += 1
    return time.perf_counter() - start, n


def _serial_rate(num_envs: int, seconds: float, results) -> None:
    with vector.make(ENV_ID, num_envs=num_envs, seed=os.getpid()) as envs:
        wall, n = batches(envs, seconds)
    results.put(n * num_envs / wall)


def step_seconds(cpus: int, num_envs: int, seconds: float) -> float:
    """CPU seconds per step when ``cpus`` processes step ``num_envs / cpus`` games each, at once."""
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_serial_rate, args=(num_envs // cpus, seconds, results)) for _ in range(cpus)]
    for proc in procs:
        proc.start()
    try:
        total = sum(results.get(timeout=seconds * 10 + 120) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    return cpus / total


def hollow_step_seconds(seconds: float) -> float:
    """Seconds per hollow step of one emulated game (with episode statistics, as a vector env steps it)."""
    env = GymnasiumEmulator(EpisodeStats(hollow()))
    env.reset(seed=0)
    step, n, start = env.step_in_place, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            step(0)
        n += 100
    wall = time.perf_counter() - start
    env.close()
    return wall / n


def per_batch_seconds(num_envs: int, batch_size: int, seconds: float) -> float:
    """The main process's seconds per recv/send pair outside env steps, on hollow games."""
    main_kwargs = {"main_share": True}
    with vector.make(
        hollow,
        num_envs=num_envs,
        num_workers=1,
        batch_size=batch_size,
        backend="multiprocessing",
        seed=0,
        vector_kwargs=main_kwargs,
    ) as envs:
        wall, n = batches(envs, seconds)
    # The main share (half the envs) steps once per round of num_envs / batch_size batches.
    main_steps = n * batch_size / num_envs * (num_envs // 2)
    return (wall - main_steps * hollow_step_seconds(seconds)) / n


def setting_rate(num_envs: int, batch_size: int, seconds: float) -> float:
    with vector.make(
        ENV_ID,
        num_envs=num_envs,
        num_workers=1,
        batch_size=batch_size,
        backend="multiprocessing",
        seed=0,
        vector_kwargs={"main_share": True},
    ) as envs:
        wall, n = batches(envs, seconds)
    return n * batch_size / wall


def measure(num_envs: int, batch_size: int, seconds: float, rounds: int) -> dict:
    cpus = len(os.sched_getaffinity(0))
    best: dict[str, list[float]] = {"raw": [], "setting": [], "step": [], "per_batch": []}
    for _ in range(rounds):  # interleaved; each figure keeps its best round
        best["raw"].append(raw_loop(seconds))
        best["setting"].append(setting_rate(num_envs, batch_size, seconds))
        best["step"].append(step_seconds(cpus, num_envs, seconds))
        best["per_batch"].append(per_batch_seconds(num_envs, batch_size, seconds))
    raw, setting = max(best["raw"]), max(best["setting"])
    step, per_batch = min(best["step"]), min(best["per_batch"])
    bound = cpus / (step + per_batch / batch_size)
    return {
        "cpus": cpus,
        "num_envs": num_envs,
        "batch_size": batch_size,
        "raw_sps": raw,
        "setting_sps": setting,
        "step_us": step * 1e6,
        "per_batch_us": per_batch * 1e6,
        "bound_sps": bound,
        "bound_over_raw": bound / raw,
        "setting_over_raw": setting / raw,
        "setting_over_bound": setting / bound,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per figure and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.num_envs % 2 or args.num_envs % args.batch_size:
        parser.error("--num-envs must be even and a multiple of --batch-size (1 worker + the main share)")
    r = measure(args.num_envs, args.batch_size, args.seconds, args.rounds)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"{ENV_ID}, {r['num_envs']} envs, batch {r['batch_size']}, {r['cpus']} CPUs")
    print(f"  raw single-game loop:                 {r['raw_sps']:9,.0f} steps/s")
    print(f"  a step, {r['num_envs'] // r['cpus']} games per process:         {r['step_us']:9.1f} µs of CPU")
    print(f"  the main process's work per batch:    {r['per_batch_us']:9.1f} µs")
    print(
        f"  bound: {r['cpus']} / (step + per batch / {r['batch_size']}): "
        f"{r['bound_sps']:9,.0f} steps/s = {r['bound_over_raw']:.2f}× raw"
    )
    print(
        f"  1 worker + main share, batch {r['batch_size']}:       {r['setting_sps']:9,.0f} steps/s = "
        f"{r['setting_over_raw']:.2f}× raw, {r['setting_over_bound']:.0%} of the bound"
    )


if __name__ == "__main__":
    main()
