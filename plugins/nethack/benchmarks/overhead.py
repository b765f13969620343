"""Step time of ``puffer_core.make("nethack/score")`` over a raw ``gymnasium.make("NetHackScore-v0")`` loop.

    python plugins/nethack/benchmarks/overhead.py [--steps 20000] [--rounds 10] [--repeats 5] [--keys all] [--copying]

Both envs have the same observation keys (the plugin's default glyphs, blstats, message;
``--keys all``: every key but ``internal``, about 150 KB a step) and play
the same games: the raw env's NetHack is seeded before every reset with the (core, disp)
pairs the plugin's wrapper draws from the same seed, and both get the same actions, so the
trajectories are identical (checked). The loops are interleaved in short rounds, timed in
CPU time of this thread with resets left out (as ``puffer_core.bench.emulation`` does);
the ratio printed is the median over the repeats of each repeat's median round ratio.
``--copying`` measures the emulator with the zero-copy binding refused (the copying path).
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import numpy as np
from puffer_plugin_nethack.envs import resolve_observation_keys

import puffer_core
from puffer_core import make_raw
from puffer_core.emulation import GymnasiumEmulator
from puffer_core.postprocess import EpisodeStats
from puffer_core.testing import interleaved

SEED_HIGH = 2**63 - 1  # as puffer_plugin_nethack.wrappers draws them


class Copying(gymnasium.Wrapper):
    def puffer_bind_observation(self, views):
        return False


def raw_env(seed: int, keys: tuple[str, ...]):
    import nle  # noqa: F401 - registers NetHackScore-v0

    env = gymnasium.make("NetHackScore-v0", observation_keys=keys, fix_moon_phase=True)
    rng = np.random.default_rng(seed)
    game = env.unwrapped.nethack

    def reset():
        core, disp = (int(x) for x in rng.integers(1, SEED_HIGH, size=2, dtype=np.int64))
        game.set_initial_seeds(core, disp, False)
        return env.reset()

    return env, reset


def one_repeat(steps: int, rounds: int, seed: int, copying: bool, keys: str) -> tuple[float, float, float]:
    resolved = resolve_observation_keys(keys)
    raw, raw_reset = raw_env(seed, resolved)
    if copying:
        emulated = GymnasiumEmulator(EpisodeStats(Copying(make_raw("nethack/score", observation_keys=keys))))
    else:
        emulated = puffer_core.make("nethack/score", observation_keys=keys)
    assert emulated.zero_copy != copying
    rng = np.random.default_rng(seed)
    raw_actions = [int(a) for a in rng.integers(0, raw.action_space.n, min(steps, 10_000))]
    flat_actions = [np.int64(a) for a in raw_actions]  # numpy values, as a vector env holds them
    raw_reset()
    emulated.reset(seed=seed)
    # Same games under the same actions: compare a few observations.
    ob = emulated.unflatten_observation(emulated.buf.observations[0])
    assert np.array_equal(ob["glyphs"], raw.unwrapped.last_observation[raw.unwrapped._glyph_index])
    try:
        result = interleaved(
            (raw.step, raw_reset, raw_actions), (emulated.step_in_place, emulated.reset, flat_actions), steps, rounds
        )
    finally:
        raw.close()
        emulated.close()
    return result["raw_sps"], result["emulated_sps"], result["ratio"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keys", choices=("lean", "all"), default="lean", help="observation keys")
    parser.add_argument("--copying", action="store_true", help="refuse the zero-copy binding")
    args = parser.parse_args()
    results = []
    for repeat in range(args.repeats):
        started = time.perf_counter()
        raw_sps, emu_sps, ratio = one_repeat(args.steps, args.rounds, repeat, args.copying, args.keys)
        results.append(ratio)
        print(
            f"repeat {repeat}: raw {raw_sps:,.0f} SPS, emulated {emu_sps:,.0f} SPS, ratio {ratio:.3f} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    what = f"{args.keys} keys, {'copying' if args.copying else 'zero copy'}"
    print(f"nethack/score ({what}) emulated/raw step time: median {statistics.median(results):.3f}")


if __name__ == "__main__":
    main()
