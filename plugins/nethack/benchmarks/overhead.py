"""Step time of ``puffer_core.make("nethack/score")`` over a raw ``gymnasium.make("NetHackScore-v0")`` loop.

    python plugins/nethack/benchmarks/overhead.py [--steps 20000] [--rounds 10] [--repeats 5] [--keys all] [--copying]

Both envs have the same observation keys (the plugin's default glyphs, blstats, message;
``--keys all``: every key but ``internal``, about 150 KB a step) and play
the same games: the raw env's NetHack is seeded before every reset with the (core, disp)
pairs the plugin's wrapper draws from the same seed, and both get the same actions, so the
trajectories are identical (checked). Timed by ``puffer_core.bench.plugin_overhead``
(interleaved rounds, CPU time of this thread, resets left out); the ratio printed is the
median over the repeats of each repeat's median round ratio. ``--copying`` measures the
emulator with the zero-copy binding refused (the copying path).
"""

from __future__ import annotations

import functools

import gymnasium
import numpy as np
from puffer_plugin_nethack.envs import resolve_observation_keys

import puffer_core
from puffer_core import make_raw
from puffer_core.bench.plugin_overhead import RefuseZeroCopy, overhead_parser, report_repeats, time_against_raw
from puffer_core.emulation import GymnasiumEmulator
from puffer_core.postprocess import EpisodeStats

SEED_HIGH = 2**63 - 1  # as puffer_plugin_nethack.wrappers draws them


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


def one_repeat(steps: int, rounds: int, copying: bool, keys: str, seed: int) -> dict:
    raw, raw_reset = raw_env(seed, resolve_observation_keys(keys))
    if copying:
        emulated = GymnasiumEmulator(EpisodeStats(RefuseZeroCopy(make_raw("nethack/score", observation_keys=keys))))
    else:
        emulated = puffer_core.make("nethack/score", observation_keys=keys)
    assert emulated.zero_copy != copying
    raw_reset()
    emulated.reset(seed=seed)
    # Same games under the same actions: compare the first observation.
    ob = emulated.unflatten_observation(emulated.buf.observations[0])
    assert np.array_equal(ob["glyphs"], raw.unwrapped.last_observation[raw.unwrapped._glyph_index])
    return time_against_raw(raw, emulated, steps, rounds, seed, raw_reset=raw_reset)


def main() -> None:
    parser = overhead_parser(__doc__.splitlines()[0])
    parser.add_argument("--keys", choices=("lean", "all"), default="lean", help="observation keys")
    args = parser.parse_args()
    what = f"{args.keys} keys, {'copying' if args.copying else 'zero copy'}"
    variant = functools.partial(one_repeat, args.steps, args.rounds, args.copying, args.keys)
    report_repeats({what: variant}, args.repeats, "nethack/score")


if __name__ == "__main__":
    main()
