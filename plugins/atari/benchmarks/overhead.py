"""Step time of ``puffer_core.make("atari/breakout")`` over a raw ALE/Breakout-v5 loop with the same preprocessing.

    python plugins/atari/benchmarks/overhead.py [--steps 20000] [--rounds 10] [--repeats 5] [--copying]

Two raw baselines, both on the same seed and actions (so the same trajectory, checked):

* ``gymnasium``: ``gymnasium.make("ALE/Breakout-v5", frameskip=1, obs_type="grayscale")``
  (ALE renders grayscale, as the plugin has it do; the preprocessing reads the screen from
  ALE itself either way), ``AtariPreprocessing`` (30 no-ops, skip 4, 84x84) and gymnasium's
  ``FrameStackObservation(4)`` - what someone would write by hand;
* ``plugin``: ``make_raw("atari/breakout")``, the plugin's own chain without Puffer Core's
  episode statistics and emulation (its frame stack unbound: a copy per step).

Timed by ``puffer_core.bench.plugin_overhead`` (interleaved rounds, CPU time of this thread,
resets left out); the ratio printed is the median over the repeats of each repeat's median
round ratio. ``--copying`` measures the emulator with the zero-copy binding refused.
"""

from __future__ import annotations

import functools

import gymnasium
import numpy as np

import puffer_core
from puffer_core import make_raw
from puffer_core.bench.plugin_overhead import RefuseZeroCopy, overhead_parser, report_repeats, time_against_raw
from puffer_core.emulation import GymnasiumEmulator
from puffer_core.postprocess import EpisodeStats


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
        return GymnasiumEmulator(EpisodeStats(RefuseZeroCopy(make_raw("atari/breakout")), keep_keys=("life_lost",)))
    return puffer_core.make("atari/breakout")


def one_repeat(baseline: str, steps: int, rounds: int, copying: bool, seed: int) -> dict:
    raw = gymnasium_env() if baseline == "gymnasium" else make_raw("atari/breakout")
    emulated = emulated_env(copying)
    assert emulated.zero_copy != copying
    first, _ = raw.reset(seed=seed)
    emulated.reset(seed=seed)
    assert np.array_equal(np.asarray(first), emulated.unflatten_observation(emulated.buf.observations[0]))
    return time_against_raw(raw, emulated, steps, rounds, seed)


def main() -> None:
    parser = overhead_parser(__doc__.splitlines()[0])
    parser.add_argument("--baseline", choices=("gymnasium", "plugin", "both"), default="both")
    args = parser.parse_args()
    baselines = ("gymnasium", "plugin") if args.baseline == "both" else (args.baseline,)
    variants = {
        f"vs {name}": functools.partial(one_repeat, name, args.steps, args.rounds, args.copying) for name in baselines
    }
    report_repeats(variants, args.repeats, "atari/breakout")


if __name__ == "__main__":
    main()
