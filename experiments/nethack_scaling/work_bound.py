"""The most any vector env can reach for NetHack here, from the CPU work a step costs.

    python experiments/nethack_scaling/work_bound.py [--num-envs 8] [--batch-size 4] [--seconds 3] [--rounds 2] [--json]

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
* that setting on real games, each game's step timed in the process that steps it: how
  long a game of the main share and one of the worker take, and the share of the time
  the worker spends stepping (the rest it waits for the main process).
* the split model: games stay in the process that made them, so with 1 worker the main
  process takes ``x`` whole games and the worker the rest. A round (every game stepped
  once, in ``n / batch_size`` batches) lasts as long as the busier process:
  ``max(x · main_game + n / batch_size · main_other, (n - x) · worker_game)``, with the
  times measured in the setting (``main_other``: the main process's time per batch
  outside its games' steps, waits included). At the setting's own even split this is
  its measured rate when the main process never waits; the best ``x`` estimates what a
  finer split would reach if those times held (async batches allow only equal units
  today, so ``x = n / 2``).
* the bounds over a raw single-game loop (what the issue's target is a multiple of), all
  in the same run.
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


def batches(envs, seconds: float, on_start=None) -> tuple[float, int]:
    """(seconds, batches) of recv/send pairs over about ``seconds``, after a short warm-up
    (``on_start`` runs as the clock starts)."""
    rng = np.random.default_rng(0)
    actions = rng.integers(0, envs.single_action_space.n, (64, envs.batch_size))
    envs.async_reset(0)
    for i in range(200):
        envs.recv()
        envs.send(actions[i & 63])
    if on_start is not None:
        on_start()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.recv()
        envs.send(actions[n & 63])
        n += 1
    return time.perf_counter() - start, n


def main_share_envs(creator, num_envs: int, batch_size: int):
    """The setting under study: 1 worker + the main process's share, async batches."""
    return vector.make(
        creator,
        num_envs=num_envs,
        num_workers=1,
        batch_size=batch_size,
        backend="multiprocessing",
        seed=0,
        vector_kwargs={"main_share": True},
    )


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
    with main_share_envs(hollow, num_envs, batch_size) as envs:
        wall, n = batches(envs, seconds)
    # The main share (half the envs) steps once per round of num_envs / batch_size batches.
    main_steps = n * batch_size / num_envs * (num_envs // 2)
    return (wall - main_steps * hollow_step_seconds(seconds)) / n


#: (seconds, steps) of game steps: slots 0-1 in the main process, 2-3 in the worker. Shared
#: memory made before the vector env forks its worker, so both processes add to it.
STEP_TIMES = mp.get_context("fork").RawArray("d", 4)
MAIN_PID = os.getpid()


class Timed(gymnasium.Wrapper):
    """The game as the plugin makes it, each step timed into ``STEP_TIMES`` by process."""

    def step(self, action):
        start = time.perf_counter()
        out = self.env.step(action)
        slot = 0 if os.getpid() == MAIN_PID else 2
        STEP_TIMES[slot] += time.perf_counter() - start
        STEP_TIMES[slot + 1] += 1
        return out


def timed() -> Timed:
    return Timed(make_raw(ENV_ID))


def setting(num_envs: int, batch_size: int, seconds: float) -> dict[str, float]:
    """1 worker + the main share on real games: steps/s, and each process's game steps."""

    def zero() -> None:
        STEP_TIMES[:] = [0.0] * 4

    with main_share_envs(timed, num_envs, batch_size) as envs:
        wall, n = batches(envs, seconds, zero)
        main_s, main_n, worker_s, worker_n = STEP_TIMES[:]  # read before the worker is closed
    return {
        "sps": n * batch_size / wall,
        "main_game": main_s / max(main_n, 1),
        "worker_game": worker_s / max(worker_n, 1),
        "worker_busy": worker_s / wall,
        # everything else the main process did, per batch (its per-batch work on real games,
        # the emulation of its games, and any wait for the worker)
        "main_other_per_batch": (wall - main_s) / n,
    }


def split_rate(num_envs: int, batch_size: int, main_games: int, r: dict) -> float:
    """Steps/s when the main process steps ``main_games`` whole games and the worker the rest,
    from the setting's measured times (``r``): a round steps every game once, in
    ``num_envs / batch_size`` batches, and lasts as long as the busier process."""
    main = main_games * r["main_game"] + num_envs / batch_size * r["main_other_per_batch"]
    worker = (num_envs - main_games) * r["worker_game"]
    return num_envs / max(main, worker)


def measure(num_envs: int, batch_size: int, seconds: float, rounds: int) -> dict:
    cpus = len(os.sched_getaffinity(0))
    runs: dict[str, list] = {"raw": [], "setting": [], "step": [], "per_batch": []}
    for _ in range(rounds):  # interleaved; each figure keeps its best round
        runs["raw"].append(raw_loop(seconds))
        runs["setting"].append(setting(num_envs, batch_size, seconds))
        runs["step"].append(step_seconds(cpus, num_envs, seconds))
        runs["per_batch"].append(per_batch_seconds(num_envs, batch_size, seconds))
    raw = max(runs["raw"])
    best = max(runs["setting"], key=lambda r: r["sps"])
    step, per_batch = min(runs["step"]), min(runs["per_batch"])
    bound = cpus / (step + per_batch / batch_size)
    split_sps, main_games = max((split_rate(num_envs, batch_size, x, best), x) for x in range(1, num_envs))
    return {
        "cpus": cpus,
        "num_envs": num_envs,
        "batch_size": batch_size,
        "raw_sps": raw,
        "step_us": step * 1e6,
        "per_batch_us": per_batch * 1e6,
        "bound_sps": bound,
        "bound_over_raw": bound / raw,
        "setting_sps": best["sps"],
        "setting_over_raw": best["sps"] / raw,
        "main_game_us": best["main_game"] * 1e6,
        "worker_game_us": best["worker_game"] * 1e6,
        "worker_busy": best["worker_busy"],
        "main_other_per_batch_us": best["main_other_per_batch"] * 1e6,
        "split_best_sps": split_sps,
        "split_best_main_games": main_games,
        "split_best_over_raw": split_sps / raw,
    }


def options(description: str) -> argparse.ArgumentParser:
    """The command-line options this benchmark and ``env_units.py`` share."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per figure and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser


def main() -> None:
    parser = options(__doc__.splitlines()[0])
    args = parser.parse_args()
    if args.num_envs % 2 or args.num_envs % args.batch_size:
        parser.error("--num-envs must be even and a multiple of --batch-size (1 worker + the main share)")
    r = measure(args.num_envs, args.batch_size, args.seconds, args.rounds)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    n, b, cpus, x = r["num_envs"], r["batch_size"], r["cpus"], r["split_best_main_games"]
    rows = [
        ("raw single-game loop", f"{r['raw_sps']:,.0f} steps/s"),
        (f"CPU per step, {n // cpus} games per process", f"{r['step_us']:.1f} µs"),
        ("the main process's work per batch", f"{r['per_batch_us']:.1f} µs"),
        ("bound from CPU work alone", f"{r['bound_sps']:,.0f} steps/s = {r['bound_over_raw']:.2f}× raw"),
        (f"1 worker + main share, batch {b}", f"{r['setting_sps']:,.0f} steps/s = {r['setting_over_raw']:.2f}× raw"),
        ("  a main-share game's step", f"{r['main_game_us']:.1f} µs"),
        ("  a worker game's step", f"{r['worker_game_us']:.1f} µs"),
        ("  the worker stepping", f"{r['worker_busy']:.0%} of the time"),
        ("  the main process's other time per batch", f"{r['main_other_per_batch_us']:.1f} µs"),
        (
            f"the split model's best ({x} main : {n - x} worker)",
            f"{r['split_best_sps']:,.0f} steps/s = {r['split_best_over_raw']:.2f}× raw",
        ),
    ]
    print(f"{ENV_ID}, {n} envs, batch {b}, {cpus} CPUs")
    for label, value in rows:
        print(f"  {label:<44} {value}")


if __name__ == "__main__":
    main()
