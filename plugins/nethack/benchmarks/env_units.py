"""What async batches of one-env units would reach for NetHack: a sketch of the protocol.

    python plugins/nethack/benchmarks/env_units.py [--num-envs 8] [--batch-size 4] [--seconds 3] [--rounds 2] [--json]

Puffer Core's Multiprocessing hands out async batches in units of whole workers: with 1
worker + the main share, batch 4 of 8 envs, the worker's 4 games come back together and
leave together, so the worker waits while the main process steps its own share and serves
the batch (``work_bound.py`` measures that wait). This sketch gives every env its own
command and done word in shared memory instead, as EnvPool does: the worker steps
whichever of its games has the oldest command, the main process fills each batch with the
first ``batch_size`` games done (its own share stepped one game at a time while it waits),
so the worker's other games keep it busy while a batch is out.

It is a measurement, not a backend: no faults, infos, calls or observation handover (each
game's emulator writes its observation into its own buffer, and nothing reads the
worker's). It measures, for each split of the games (``x`` for the main process, the rest
for 1 worker), steps/s over a raw single-game loop in the same run; the gap between this
and ``puffer bench``'s best setting is what a backend with per-env units could win, less
the per-batch bookkeeping this sketch leaves out.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import time

import numpy as np

from puffer_core import make, make_raw

ENV_ID = "nethack/score"


class Words:
    """Per-env command and done words, one action per env, and a control word pair, shared
    across a fork."""

    def __init__(self, num_envs: int):
        self._map = mmap.mmap(-1, 8 * (3 * num_envs + 2), flags=mmap.MAP_SHARED)
        view = memoryview(self._map).cast("q")
        self.cmd, self.done = view[:num_envs], view[num_envs : 2 * num_envs]
        self.action, self.ctl = view[2 * num_envs : 3 * num_envs], view[3 * num_envs :]  # ctl: ready, quit


class Games:
    """Emulated games ``envs`` of one process, stepped one at a time with next-step autoreset."""

    def __init__(self, envs: range):
        self.envs = {e: make(ENV_ID) for e in envs}
        for e, env in self.envs.items():
            env.reset(seed=e)
        self.steps = {e: env.step_in_place for e, env in self.envs.items()}
        self.ended = dict.fromkeys(self.envs, False)

    def step(self, e: int, action: int) -> None:
        if self.ended[e]:
            self.envs[e].reset()
            self.ended[e] = False
        else:
            _, _, terminated, truncated, _ = self.steps[e](action)
            self.ended[e] = bool(terminated or truncated)

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def _worker(words: Words, envs: range) -> None:
    games = Games(envs)
    last = dict.fromkeys(envs, 0)
    words.ctl[0] = 1
    cmd, done, action = words.cmd, words.done, words.action
    while not words.ctl[1]:
        oldest, seq = -1, 1 << 62
        for e in envs:  # the oldest pending command first
            c = cmd[e]
            if c != last[e] and c < seq:
                oldest, seq = e, c
        if oldest < 0:
            os.sched_yield()
            continue
        games.step(oldest, action[oldest])
        last[oldest] = seq
        done[oldest] = seq


def split_rate(num_envs: int, batch_size: int, main_games: int, seconds: float) -> float:
    """Steps/s with the main process stepping games ``0 … main_games − 1`` and 1 worker the rest."""
    words = Words(num_envs)
    pid = os.fork()
    if pid == 0:
        try:
            _worker(words, range(main_games, num_envs))
        finally:
            os._exit(0)
    games = Games(range(main_games))
    try:
        while not words.ctl[0]:
            time.sleep(0.01)
        actions = np.random.default_rng(0).integers(0, games.envs[0].action_space.n, (64, batch_size)).tolist()
        ready, sent, pending, seq = list(range(num_envs)), {}, [], 0

        def recv() -> list[int]:
            nonlocal ready
            while len(ready) < batch_size:
                for e in [e for e, s in sent.items() if words.done[e] == s]:
                    del sent[e]
                    ready.append(e)
                if len(ready) >= batch_size:
                    break
                if pending:  # step one of our own games while the worker works
                    e, a = pending.pop(0)
                    games.step(e, a)
                    ready.append(e)
                else:
                    os.sched_yield()
            batch, ready = ready[:batch_size], ready[batch_size:]
            return batch

        def send(batch: list[int], acts: list[int]) -> None:
            nonlocal seq
            for e, a in zip(batch, acts):
                if e < main_games:
                    pending.append((e, a))
                else:
                    seq += 1
                    words.action[e] = a
                    sent[e] = seq
                    words.cmd[e] = seq

        k, warm = 0, time.perf_counter() + 1.0
        while time.perf_counter() < warm:
            send(recv(), actions[k & 63])
            k += 1
        k0, start = k, time.perf_counter()
        while time.perf_counter() - start < seconds:
            send(recv(), actions[k & 63])
            k += 1
        return (k - k0) * batch_size / (time.perf_counter() - start)
    finally:
        words.ctl[1] = 1
        os.waitpid(pid, 0)
        games.close()


def raw_loop(seconds: float) -> float:
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


def measure(num_envs: int, batch_size: int, seconds: float, rounds: int) -> dict:
    splits = [x for x in (num_envs // 2, num_envs // 2 - 1, num_envs // 2 - 2) if x >= 1]
    runs: dict = {"raw": [], **{x: [] for x in splits}}
    for _ in range(rounds):  # interleaved; each figure keeps its best round
        runs["raw"].append(raw_loop(seconds))
        for x in splits:
            runs[x].append(split_rate(num_envs, batch_size, x, seconds))
    raw = max(runs["raw"])
    return {
        "num_envs": num_envs,
        "batch_size": batch_size,
        "cpus": len(os.sched_getaffinity(0)),
        "raw_sps": raw,
        "splits": [{"main_games": x, "sps": max(runs[x]), "over_raw": max(runs[x]) / raw} for x in splits],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per figure and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.num_envs < 2 or not 1 <= args.batch_size <= args.num_envs:
        parser.error("--num-envs must be at least 2 and --batch-size between 1 and --num-envs")
    r = measure(args.num_envs, args.batch_size, args.seconds, args.rounds)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    n = r["num_envs"]
    print(f"{ENV_ID}, {n} envs, batch {r['batch_size']}, {r['cpus']} CPUs, one-env units")
    print(f"  {'raw single-game loop':<28} {r['raw_sps']:9,.0f} steps/s")
    for s in r["splits"]:
        label = f"{s['main_games']} main : {n - s['main_games']} worker games"
        print(f"  {label:<28} {s['sps']:9,.0f} steps/s = {s['over_raw']:.2f}× raw")


if __name__ == "__main__":
    main()
