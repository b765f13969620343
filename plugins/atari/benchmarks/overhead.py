"""Step time of ``puffer_core.make("atari/breakout")`` over a raw ALE/Breakout-v5 loop with the same preprocessing.

    python plugins/atari/benchmarks/overhead.py [--steps 20000] [--rounds 10] [--repeats 5] [--copying]

Two raw baselines, both on the same seed and actions (so the same trajectory, checked):

* ``gymnasium``: ``gymnasium.make("ALE/Breakout-v5", frameskip=1, obs_type="grayscale")``
  (ALE renders grayscale, as the plugin has it do; the preprocessing reads the screen from
  ALE itself either way), ``AtariPreprocessing`` (30 no-ops, skip 4, 84x84) and gymnasium's
  ``FrameStackObservation(4)`` - what someone would write by hand;
* ``plugin``: ``make_raw("atari/breakout")``, the plugin's own chain without Puffer Core's
  episode statistics and emulation (its frame stack unbound: a copy per step).

The loops are interleaved in short rounds, timed in CPU time of this thread with resets
left out (as ``puffer_core.bench.emulation`` does); the ratio printed is the median over
the repeats of each repeat's median round ratio. ``--copying`` measures the emulator with
the zero-copy binding refused (the copying path).
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium
import numpy as np

import puffer_core
from puffer_core import make_raw
from puffer_core.emulation import GymnasiumEmulator
from puffer_core.postprocess import EpisodeStats
from puffer_core.testing import interleaved


class Copying(gymnasium.Wrapper):
    def puffer_bind_observation(self, view):
        return False


def gymnasium_env():
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    gymnasium.register_envs(ale_py)
    env = gymnasium.make("ALE/Breakout-v5", frameskip=1, obs_type="grayscale")
    env = AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False)
    return FrameStackObservation(env, 4)


def emulated_env(copying: bool):
    if copying:
        spec_keys = ("life_lost",)
        return GymnasiumEmulator(EpisodeStats(Copying(make_raw("atari/breakout")), keep_keys=spec_keys))
    return puffer_core.make("atari/breakout")


def one_repeat(baseline: str, steps: int, rounds: int, seed: int, copying: bool) -> tuple[float, float, float]:
    raw = gymnasium_env() if baseline == "gymnasium" else make_raw("atari/breakout")
    emulated = emulated_env(copying)
    assert emulated.zero_copy != copying
    rng = np.random.default_rng(seed)
    raw_actions = [int(a) for a in rng.integers(0, raw.action_space.n, min(steps, 10_000))]
    flat_actions = [np.int64(a) for a in raw_actions]  # numpy values, as a vector env holds them
    first, _ = raw.reset(seed=seed)
    emulated.reset(seed=seed)
    assert np.array_equal(np.asarray(first), emulated.unflatten_observation(emulated.buf.observations[0]))
    try:
        result = interleaved(
            (raw.step, raw.reset, raw_actions), (emulated.step_in_place, emulated.reset, flat_actions), steps, rounds
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
    parser.add_argument("--baseline", choices=("gymnasium", "plugin", "both"), default="both")
    parser.add_argument("--copying", action="store_true", help="refuse the zero-copy binding")
    args = parser.parse_args()
    baselines = ("gymnasium", "plugin") if args.baseline == "both" else (args.baseline,)
    results: dict[str, list[float]] = {name: [] for name in baselines}
    for repeat in range(args.repeats):
        for name in baselines:  # interleaved: drift hits both baselines alike
            started = time.perf_counter()
            raw_sps, emu_sps, ratio = one_repeat(name, args.steps, args.rounds, seed=repeat, copying=args.copying)
            results[name].append(ratio)
            print(
                f"repeat {repeat} vs {name}: raw {raw_sps:,.0f} SPS, emulated {emu_sps:,.0f} SPS, "
                f"ratio {ratio:.3f} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    for name, ratios in results.items():
        print(f"atari/breakout emulated/raw ({name}) step time: median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
