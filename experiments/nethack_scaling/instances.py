"""Why NetHack scales poorly on few cores: step time against what else shares the core.

    python experiments/nethack_scaling/instances.py [--seconds 3] [--json]

Measures, on ``nethack/score`` (the plugin's lean keys, random actions, resets included):

* ``instances``: µs per step when one process steps k NLE games in turn (k = 1, 2, 4, 8),
  as a vector worker holding k envs does. Every NLE game loads its own copy of
  ``libnethack.so`` (NetHack keeps its state in globals), so k games are k copies of the
  code and data competing for the core's caches.
* ``pollution``: µs per step of one game when N KB of unrelated memory is read between
  steps (the time spent reading it is not counted): how much any other work on the same
  core, such as a trainer's main loop, slows the next step.
* ``parallel``: steps/s of two single-game processes running at once, over one alone,
  first by themselves, then next to a third process that only calls ``sched_yield()`` in
  a loop, the least a vector env's main process can do while it waits on two workers.
  On a 2-core machine this bounds what 2 workers can reach over one raw env loop.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time

import numpy as np

from puffer_core import make_raw

ENV_ID = "nethack/score"


def _step_time(envs: list, seconds: float, between=None) -> float:
    """Mean µs per step over ``seconds``, stepping ``envs`` in turn; ``between`` runs untimed."""
    rng = np.random.default_rng(0)
    actions = [int(a) for a in rng.integers(0, envs[0].action_space.n, 4096)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    perf = time.perf_counter

    def run(budget: float) -> tuple[int, float]:
        steps, excluded, start, k = 0, 0.0, perf(), 0
        while perf() - start < budget:
            for env in envs:
                _, _, term, trunc, _ = env.step(actions[k & 4095])
                k += 1
                if term or trunc:
                    env.reset()
                if between is not None:
                    t = perf()
                    between()
                    excluded += perf() - t
            steps += len(envs)
        return steps, perf() - start - excluded

    run(min(1.0, seconds / 3))
    steps, busy = run(seconds)
    return busy / steps * 1e6


def instances(seconds: float, counts=(1, 2, 4, 8)) -> dict[int, float]:
    out = {}
    for k in counts:
        envs = [make_raw(ENV_ID) for _ in range(k)]
        try:
            out[k] = _step_time(envs, seconds)
        finally:
            for env in envs:
                env.close()
    return out


def pollution(seconds: float, sizes_kb=(0, 64, 256, 1024, 4096)) -> dict[int, float]:
    out = {}
    env = make_raw(ENV_ID)
    try:
        for kb in sizes_kb:
            junk = np.ones(kb * 1024 // 8)
            out[kb] = _step_time([env], seconds, junk.sum if kb else None)
    finally:
        env.close()
    return out


def _loop(seconds: float, results) -> None:
    env = make_raw(ENV_ID)
    results.put(1e6 / _step_time([env], seconds))
    env.close()


def _yield_forever() -> None:
    while True:
        os.sched_yield()


def _together(seconds: float, processes: int, with_yielder: bool) -> float:
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    loops = [ctx.Process(target=_loop, args=(seconds, results)) for _ in range(processes)]
    yielder = ctx.Process(target=_yield_forever, daemon=True) if with_yielder else None
    if yielder is not None:
        yielder.start()
    try:
        for proc in loops:
            proc.start()
        total = sum(results.get(timeout=seconds * 10 + 60) for _ in loops)
        for proc in loops:
            proc.join()
    finally:
        for proc in loops:
            if proc.is_alive():
                proc.kill()
        if yielder is not None:
            yielder.kill()
            yielder.join()
    return total


def parallel(seconds: float) -> dict[str, float]:
    one = _together(seconds, 1, False)
    two = _together(seconds, 2, False)
    two_and_yielder = _together(seconds, 2, True)
    return {
        "one_sps": one,
        "two_sps": two,
        "two_over_one": two / one,
        "two_with_yielder_sps": two_and_yielder,
        "two_with_yielder_over_one": two_and_yielder / one,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per figure")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = {
        "cpus": os.cpu_count(),
        "instances_us_per_step": instances(args.seconds),
        "pollution_us_per_step": pollution(args.seconds),
        "parallel": parallel(args.seconds),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{ENV_ID} on {result['cpus']} CPUs")
    print("games stepped in turn by one process -> µs per step")
    for k, us in result["instances_us_per_step"].items():
        print(f"  {k} game(s): {us:6.2f}")
    print("KB of other data read between steps -> µs per step")
    for kb, us in result["pollution_us_per_step"].items():
        print(f"  {kb:5d} KB: {us:6.2f}")
    par = result["parallel"]
    print(f"one process alone: {par['one_sps']:,.0f} steps/s")
    print(f"two processes at once: {par['two_sps']:,.0f} steps/s = {par['two_over_one']:.2f}× one")
    print(
        f"two processes + one that only yields: {par['two_with_yielder_sps']:,.0f} steps/s "
        f"= {par['two_with_yielder_over_one']:.2f}× one"
    )


if __name__ == "__main__":
    main()
