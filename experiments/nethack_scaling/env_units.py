"""What async batches could reach for NetHack with a lean protocol: a sketch, in units of one env or of a whole worker.

    python experiments/nethack_scaling/env_units.py [--num-envs 8] [--batch-size 4] [--seconds 3] [--rounds 2] [--json]

With 1 worker + the main share, batch 4 of 8 envs, Puffer Core's Multiprocessing reaches
about 1.0× a raw single-game loop, and ``work_bound.py`` shows why: the worker waits for
the main process, whose own games and per-batch work (``recv``, ``send``, completions:
about 23 µs next to real games) take longer than the worker's games. This sketch runs the
same games and the same split with the least bookkeeping there can be: per-env command
and done words in shared memory, the worker stepping whichever of its games has the oldest
command, the main process stepping its own share one game at a time while it waits and
handing out the first units done. It measures steps/s over a raw loop in the same run:

* one-env units (as EnvPool hands out envs) at a few splits of the games: ``x`` for the
  main process, the rest for the worker;
* whole-worker units (the backend's granularity: a batch is the worker's 4 games or the
  main process's 4), when the batch is half the envs.

It is a measurement, not a backend: no faults, infos, calls, action checks or observation
handover (each game's emulator writes into its own buffer; nothing reads the worker's).
The gap between its whole-worker row and ``puffer bench``'s best setting is what a leaner
per-batch path in the backend could win; the gap between its rows is what finer units add.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import time
from collections.abc import Callable, Iterator

import numpy as np
from work_bound import options, raw_loop  # beside this file: one raw loop and one set of options for both

from puffer_core import make

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


def _worker(words: Words, envs: range, lowest_first: bool = False) -> None:
    """Step ``envs`` as commands come: the oldest pending command first, or (``lowest_first``)
    the lowest env with one pending."""
    games = Games(envs)
    last = dict.fromkeys(envs, 0)
    words.ctl[0] = 1
    cmd, done, action = words.cmd, words.done, words.action
    while not words.ctl[1]:
        oldest, seq = -1, 1 << 62
        for e in envs:
            c = cmd[e]
            if c != last[e] and c < seq:
                oldest, seq = e, c
                if lowest_first:
                    break
        if oldest < 0:
            os.sched_yield()
            continue
        games.step(oldest, action[oldest])
        last[oldest] = seq
        done[oldest] = seq


@contextlib.contextmanager
def sketch(num_envs: int, main_games: int, lowest_first: bool = False) -> Iterator[tuple[Words, Games]]:
    """The words, shared with a forked worker that steps games ``main_games …`` once it is
    ready, and this process's games ``0 … main_games − 1``; on exit the worker stops and the
    games close."""
    words = Words(num_envs)
    pid = os.fork()
    if pid == 0:
        try:
            _worker(words, range(main_games, num_envs), lowest_first)
        finally:
            os._exit(0)
    games = Games(range(main_games))
    try:
        while not words.ctl[0]:
            time.sleep(0.01)
        yield words, games
    finally:
        words.ctl[1] = 1
        os.waitpid(pid, 0)
        games.close()


def batches_per_second(step: Callable[[int], None], seconds: float) -> float:
    """``step(k)`` (one ``send(recv(), …)`` pair) called for a second's warm-up, then timed
    for ``seconds``: pairs per second."""
    k, warm = 0, time.perf_counter() + 1.0
    while time.perf_counter() < warm:
        step(k)
        k += 1
    k0, start = k, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(k)
        k += 1
    return (k - k0) / (time.perf_counter() - start)


def split_rate(num_envs: int, batch_size: int, main_games: int, seconds: float, unit: int = 1) -> float:
    """Steps/s with the main process stepping games ``0 … main_games − 1`` and 1 worker the
    rest, in units of ``unit`` games: a unit's games are sent together and it is ready once
    all of them are done (``unit = num_envs / 2``: whole-worker units, as the backend does)."""
    units = [range(first, first + unit) for first in range(0, num_envs, unit)]
    main_units = main_games // unit
    with sketch(num_envs, main_games) as (words, games):
        actions = np.random.default_rng(0).integers(0, games.envs[0].action_space.n, (64, batch_size)).tolist()
        ready, sent, pending, seq, need = list(range(len(units))), {}, [], 0, batch_size // unit

        def recv() -> list[int]:
            nonlocal ready
            while len(ready) < need:
                for u in [u for u, s in sent.items() if all(words.done[e] == s for e in units[u])]:
                    del sent[u]
                    ready.append(u)
                if len(ready) >= need:
                    break
                if pending:  # step one of our own games while the worker works
                    u, e, a = pending.pop(0)
                    games.step(e, a)
                    if e == units[u][-1]:
                        ready.append(u)
                else:
                    os.sched_yield()
            batch, ready = ready[:need], ready[need:]
            return batch

        def send(batch: list[int], acts: list[int]) -> None:
            nonlocal seq
            given = iter(acts)
            for u in batch:
                if u < main_units:
                    pending.extend((u, e, next(given)) for e in units[u])
                    continue
                seq += 1
                for e in units[u]:
                    words.action[e] = next(given)
                    words.cmd[e] = seq
                sent[u] = seq

        return batch_size * batches_per_second(lambda k: send(recv(), actions[k & 63]), seconds)


def measure(num_envs: int, batch_size: int, seconds: float, rounds: int) -> dict:
    half = num_envs // 2
    # (label, main games, unit): one-env units at a few splits, and whole-worker units (the
    # backend's granularity) when the batch is one worker's share
    cases = [(f"{x} main : {num_envs - x} worker, one-env units", x, 1) for x in (half, half - 1, half - 2) if x >= 1]
    if batch_size == half:
        cases.append((f"{half} main : {half} worker, whole-worker units", half, half))
    runs: dict = {"raw": [], **{label: [] for label, _, _ in cases}}
    for _ in range(rounds):  # interleaved; each figure keeps its best round
        runs["raw"].append(raw_loop(seconds))
        for label, x, unit in cases:
            runs[label].append(split_rate(num_envs, batch_size, x, seconds, unit))
    raw = max(runs["raw"])
    return {
        "num_envs": num_envs,
        "batch_size": batch_size,
        "cpus": len(os.sched_getaffinity(0)),
        "raw_sps": raw,
        "cases": [
            {
                "case": label,
                "main_games": x,
                "unit_envs": unit,
                "sps": max(runs[label]),
                "over_raw": max(runs[label]) / raw,
            }
            for label, x, unit in cases
        ],
    }


def main() -> None:
    parser = options(__doc__.splitlines()[0])
    args = parser.parse_args()
    if args.num_envs < 2 or not 1 <= args.batch_size <= args.num_envs:
        parser.error("--num-envs must be at least 2 and --batch-size between 1 and --num-envs")
    r = measure(args.num_envs, args.batch_size, args.seconds, args.rounds)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"{ENV_ID}, {r['num_envs']} envs, batch {r['batch_size']}, {r['cpus']} CPUs")
    print(f"  {'raw single-game loop':<42} {r['raw_sps']:9,.0f} steps/s")
    for c in r["cases"]:
        print(f"  {c['case']:<42} {c['sps']:9,.0f} steps/s = {c['over_raw']:.2f}× raw")


if __name__ == "__main__":
    main()
