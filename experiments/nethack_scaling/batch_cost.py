"""What the main process's work per batch costs NetHack's async batches, and what a 3 : 5 split would win back.

    python experiments/nethack_scaling/batch_cost.py [--seconds 3] [--rounds 2] [--work-us 0 5 10 15 20] [--json]

8 games in two fixed batches of 4, 1 worker process and the main process, which steps its
own games while it waits (``env_units.py``'s lean protocol: per-env command and done words,
no checks, no infos). Before each ``send`` the main process spins for ``work_us``
microseconds, a stand-in for the per-batch work of a real backend (``recv``, ``send``, their
checks) and of its caller. Measured over a raw single-game loop in the same run:

* the backend's granularity: the main process steps batch 0's 4 games, the worker batch 1's;
* a 3 : 5 split: the main process steps 3 of batch 0's games, the worker batch 0's fourth
  and all of batch 1's, stepping the shared batch's game first (oldest command first makes
  the shared batch wait behind the worker's own, which costs far more than it wins);
* Puffer Core's best setting for few cores (1 worker + the main share, batch 4, through
  ``recv``/``send``), so its place on the curve can be read off.

The slope of the first row is what each microsecond of per-batch work costs; where the
backend falls on it says how much per-batch work it does next to real games.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
from env_units import batches_per_second, sketch  # beside this file
from work_bound import batches, main_share_envs, options, raw_loop

ENV_ID = "nethack/score"
NUM_ENVS, BATCH = 8, 4
DEFAULT_WORK_US = (0.0, 5.0, 10.0, 15.0, 20.0)
SPLIT_WORK_US = (0.0, 10.0, 20.0)


def spin(microseconds: float) -> None:
    """Keep the main process busy for ``microseconds`` (the stand-in for per-batch work)."""
    end = time.perf_counter() + microseconds * 1e-6
    while time.perf_counter() < end:
        pass


def sketch_rate(main_games: int, work_us: float, seconds: float) -> float:
    """Steps/s of batches ``0..3`` and ``4..7``, the main process stepping games ``< main_games``."""
    batches = [range(0, BATCH), range(BATCH, NUM_ENVS)]
    with sketch(NUM_ENVS, main_games, lowest_first=True) as (words, games):
        actions = np.random.default_rng(0).integers(0, games.envs[0].action_space.n, (64, BATCH)).tolist()
        ready, sent, pending, parts_left, seq = [0, 1], {}, [], [0, 0], 0

        def part_done(b: int) -> None:
            parts_left[b] -= 1
            if not parts_left[b]:
                ready.append(b)

        def recv() -> int:
            while not ready:
                for b in [b for b, words_sent in sent.items() if all(words.done[e] == s for e, s in words_sent)]:
                    del sent[b]
                    part_done(b)
                if ready:
                    break
                if pending:  # one of our own games while the worker works
                    b, e, a = pending.pop(0)
                    games.step(e, a)
                    if not pending or pending[0][0] != b:
                        part_done(b)
                else:
                    os.sched_yield()
            return ready.pop(0)

        def send(b: int, acts: list[int]) -> None:
            nonlocal seq
            spin(work_us)
            ours = [(b, e, a) for e, a in zip(batches[b], acts) if e < main_games]
            theirs = []
            for e, a in zip(batches[b], acts):
                if e >= main_games:
                    seq += 1
                    words.action[e] = a
                    words.cmd[e] = seq
                    theirs.append((e, seq))
            parts_left[b] = bool(ours) + bool(theirs)
            if theirs:
                sent[b] = theirs
            pending.extend(ours)

        return BATCH * batches_per_second(lambda k: send(recv(), actions[k & 63]), seconds)


def backend_rate(seconds: float) -> float:
    """Steps/s of Puffer Core's best setting for few cores (1 worker + the main share, batch 4)."""
    with main_share_envs(ENV_ID, NUM_ENVS, BATCH) as envs:
        elapsed, count = batches(envs, seconds)
    return count * BATCH / elapsed


def measure(seconds: float, rounds: int, work_us: tuple[float, ...]) -> dict:
    cases = [("4 : 4 (the backend's units)", 4, w) for w in work_us]
    cases += [("3 : 5 (one batch shared)", 3, w) for w in work_us if w in SPLIT_WORK_US]
    runs: dict = {"raw": [], "backend": [], **{(label, w): [] for label, _, w in cases}}
    for _ in range(rounds):  # interleaved; each figure keeps its best round
        runs["raw"].append(raw_loop(seconds))
        for label, main_games, w in cases:
            runs[(label, w)].append(sketch_rate(main_games, w, seconds))
        runs["backend"].append(backend_rate(seconds))
    raw = max(runs["raw"])
    return {
        "env": ENV_ID,
        "num_envs": NUM_ENVS,
        "batch_size": BATCH,
        "cpus": len(os.sched_getaffinity(0)),
        "raw_sps": raw,
        "cases": [
            {"split": label, "work_us": w, "sps": max(runs[(label, w)]), "over_raw": max(runs[(label, w)]) / raw}
            for label, _, w in cases
        ],
        "backend": {"sps": max(runs["backend"]), "over_raw": max(runs["backend"]) / raw},
    }


def main() -> None:
    parser = options(__doc__.splitlines()[0])
    parser.add_argument("--work-us", type=float, nargs="+", default=list(DEFAULT_WORK_US), metavar="US")
    args = parser.parse_args()
    if (args.num_envs, args.batch_size) != (NUM_ENVS, BATCH):
        parser.error(f"this sketch is written for --num-envs {NUM_ENVS} --batch-size {BATCH}")
    if any(w < 0 for w in args.work_us):
        parser.error("--work-us takes microseconds ≥ 0")
    r = measure(args.seconds, args.rounds, tuple(args.work_us))
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"{ENV_ID}, {NUM_ENVS} envs, batches of {BATCH}, {r['cpus']} CPUs; raw loop {r['raw_sps']:,.0f} steps/s")
    for c in r["cases"]:
        work = f"work {c['work_us']:5.1f} µs/batch"
        print(f"  {c['split']:<28} {work}  {c['sps']:9,.0f} steps/s = {c['over_raw']:.3f}× raw")
    b = r["backend"]
    print(f"  {'Puffer Core, 1 worker + main share':<51} {b['sps']:9,.0f} steps/s = {b['over_raw']:.3f}× raw")


if __name__ == "__main__":
    main()
