"""Emulation overhead: raw env step loop vs emulated (+ EpisodeStats) step loop.

Run ``python -m puffer_core.bench.emulation [cartpole|breakout|nethack ...] [--steps N]``.
Both loops run in this process on the same action sequence and seed, interleaved in short
rounds (``puffer_core.vector.timing.interleaved``) so that drift (CPU frequency, other processes)
hits both alike; the ratio is
emulated step time (``step_in_place``, as the vector backends step it: the public ``step``
adds one copy of the observation) over raw step time (lower is better, 1.0 is free). The
"without stats" column times the emulator alone, without ``EpisodeStats``: what any flat
buffer costs (one more Python call, the action conversion, the observation copied into
the buffer row, reward and flags stored), apart from the episode bookkeeping. The "floor"
column (envs with a 1-D Box observation and a Discrete action, such as CartPole) times the
least any Python emulator with episode statistics does, written out by hand (see
``floor_overhead``): how much of the overhead is the emulator's own.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from puffer_core.env.emulation import GymnasiumEmulator
from puffer_core.env.postprocess import EpisodeStats, episode_info
from puffer_core.vector.timing import interleaved

__all__ = ["FACTORIES", "emulation_overhead", "floor_overhead"]


def _cartpole() -> Any:
    return gymnasium.make("CartPole-v1")


def _breakout() -> Any:
    import ale_py

    gymnasium.register_envs(ale_py)
    return gymnasium.make("ALE/Breakout-v5")


def _nethack() -> Any:
    import nle  # noqa: F401 - registers NetHackScore-v0

    env = gymnasium.make("NetHackScore-v0")
    # NetHack's game RNGs ignore reset(seed=): fix them so the raw and the emulated env play
    # the same games under the same actions (game state changes the cost of a step a lot).
    env.unwrapped.nethack.set_initial_seeds(12345, 67890, False)
    return env


#: name → env factory (the raw env, and the env handed to the emulator). The plugins'
#: zero-copy paths (``bind_nle_buffers``, Atari's frame binding) are measured through
#: ``puffer bench``'s emulation rows, which build envs with ``puffer_core.make``.
FACTORIES: dict[str, Callable[[], Any]] = {"cartpole": _cartpole, "breakout": _breakout, "nethack": _nethack}


def emulation_overhead(
    env_factory: Callable[[], Any],
    steps: int,
    rounds: int = 10,
    seed: int = 0,
    episode_stats: bool = True,
) -> dict:
    """Measure ``steps`` raw and ``steps`` emulated steps; returns raw_sps, emulated_sps, ratio.

    The emulated env is ``GymnasiumEmulator(EpisodeStats(env_factory()))``, or without the
    ``EpisodeStats`` when ``episode_stats`` is False.

    ``ratio`` is the median of the per-round ratios (robust to a round disturbed by noise);
    the SPS figures are totals over all rounds.
    """
    raw = env_factory()
    emulated = GymnasiumEmulator(EpisodeStats(env_factory()) if episode_stats else env_factory())
    raw.action_space.seed(seed)
    raw_actions = [raw.action_space.sample() for _ in range(min(steps, 10_000))]
    flat_actions = [emulated.flatten_action(a) for a in raw_actions]
    if np.ndim(flat_actions[0]) == 0:
        # As the vector backends hand them: their hot loop steps a discrete action row
        # with ``actions.tolist()``'s Python ints, any other action as its numpy row.
        flat_actions = [a.item() for a in flat_actions]
    if isinstance(raw.action_space, gymnasium.spaces.Discrete):
        # The raw loop gets the cheapest action type (a Python int, which gymnasium's checks
        # accept fastest), so the emulator's own int() conversion cannot flatter the ratio.
        raw_actions = [int(a) for a in raw_actions]
    raw.reset(seed=seed)
    emulated.reset(seed=seed)
    try:
        return interleaved(
            (raw.step, raw.reset, raw_actions), (emulated.step_in_place, emulated.reset, flat_actions), steps, rounds
        )
    finally:
        raw.close()
        emulated.close()


def _floor_fits(env: Any) -> bool:
    """Whether ``_floor_loop`` is written for ``env``: a 1-D Box observation, a 0-based Discrete action."""
    obs_space, act_space = env.observation_space, env.action_space
    return (
        isinstance(obs_space, gymnasium.spaces.Box)
        and len(obs_space.shape) == 1
        and isinstance(act_space, gymnasium.spaces.Discrete)
        and int(act_space.start) == 0
    )


def _floor_loop(env: Any) -> tuple[Callable, Callable]:
    """(step, reset) doing per step only what an emulator with episode statistics must: the
    action's ``int()``, the env's step, the observation copied into a buffer row, reward and
    flags stored (through memoryviews, the cheapest store), return and length counted, and
    an empty info (the episode's numbers at its end). Only for envs ``_floor_fits``."""
    obs_space = env.observation_space
    row = np.zeros(obs_space.shape, obs_space.dtype)
    reward_mv, terminal_mv, truncation_mv = (
        memoryview(np.zeros(1, dtype)) for dtype in (np.float32, np.bool_, np.bool_)
    )
    env_step, env_reset = env.step, env.reset
    episode_return, episode_length = 0.0, 0

    def step(action: Any) -> tuple:
        nonlocal episode_return, episode_length
        ob, reward, terminated, truncated, info = env_step(int(action))
        row[...] = ob
        reward_mv[0] = reward
        terminal_mv[0] = terminated
        truncation_mv[0] = truncated
        episode_return += reward
        episode_length += 1
        if terminated or truncated:
            info = episode_info(info, episode_return, episode_length)
        else:
            info = {}
        return row, reward, terminated, truncated, info

    def reset(seed: int | None = None) -> tuple:
        nonlocal episode_return, episode_length
        ob, _ = env_reset(seed=seed)
        row[...] = ob
        episode_return, episode_length = 0.0, 0
        return row, {}

    return step, reset


def floor_overhead(env_factory: Callable[[], Any], steps: int, rounds: int = 10, seed: int = 0) -> dict | None:
    """``emulation_overhead``'s measurement with ``_floor_loop`` in the emulator's place: the
    least overhead a Python emulator with episode statistics has on this env (None where the
    floor loop does not apply)."""
    raw, inner = env_factory(), None
    try:
        if not _floor_fits(raw):
            return None
        inner = env_factory()
        floor = _floor_loop(inner)
        raw.action_space.seed(seed)
        actions = [int(raw.action_space.sample()) for _ in range(min(steps, 10_000))]
        raw.reset(seed=seed)
        floor[1](seed)
        return interleaved((raw.step, raw.reset, actions), (*floor, actions), steps, rounds)
    finally:
        raw.close()
        if inner is not None:
            inner.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", metavar="ENV", help=f"any of {', '.join(FACTORIES)} (default: all)")
    parser.add_argument("--steps", type=int, default=None, help="steps per loop (default depends on the env)")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.envs) - set(FACTORIES))
    if unknown:
        parser.error(f"unknown env(s) {', '.join(unknown)}; choose from {', '.join(FACTORIES)}")
    default_steps = {"cartpole": 200_000}
    print(f"{'env':<18} {'raw SPS':>12} {'emulated SPS':>14} {'ratio':>7} {'without stats':>14} {'floor':>7}")
    for name in args.envs or FACTORIES:
        steps = args.steps or default_steps.get(name, 20_000)
        result = emulation_overhead(FACTORIES[name], steps, rounds=args.rounds)
        bare = emulation_overhead(FACTORIES[name], steps, rounds=args.rounds, episode_stats=False)
        floor = floor_overhead(FACTORIES[name], steps, rounds=args.rounds)
        print(
            f"{name:<18} {result['raw_sps']:>12,.0f} {result['emulated_sps']:>14,.0f} {result['ratio']:>7.3f} "
            f"{bare['ratio']:>14.3f} {'–' if floor is None else format(floor['ratio'], '.3f'):>7}"
        )


if __name__ == "__main__":
    main()
