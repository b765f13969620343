"""Your own Gymnasium env, vectorized by Puffer Core with no plugin: pass its creator to
``puffer_core.vector.make``, step it with random actions, print steps/s and episode stats.

Run: ``python examples/own_env.py`` (``--steps 200 --backend serial`` for a quick look).
"""

from __future__ import annotations

import argparse
import time

import gymnasium
import numpy as np

from puffer_core import vector


class Corridor(gymnasium.Env):
    """Walk left or right along a corridor; reaching the right end pays 1, each step costs 0.01."""

    def __init__(self, length: int = 10):
        self.length = length
        position = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
        steps_left = gymnasium.spaces.Discrete(4 * length + 1)
        self.observation_space = gymnasium.spaces.Dict({"position": position, "steps_left": steps_left})
        self.action_space = gymnasium.spaces.Discrete(2)  # 0: left, 1: right

    def _obs(self):
        position = np.array([self.position / self.length], np.float32)
        return {"position": position, "steps_left": 4 * self.length - self.t}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.t = int(self.np_random.integers(0, self.length // 2)), 0
        return self._obs(), {}

    def step(self, action):
        self.position = min(max(self.position + (1 if action == 1 else -1), 0), self.length)
        self.t += 1
        terminated = self.position == self.length
        truncated = self.t >= 4 * self.length
        return self._obs(), (1.0 if terminated else 0.0) - 0.01, terminated, truncated, {}


def make_corridor():
    # Any function works, a lambda too: the workers receive it pickled by value (cloudpickle).
    return Corridor(length=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="vector steps to take")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--backend", default="multiprocessing", choices=["serial", "multiprocessing"])
    args = parser.parse_args()
    workers = 2 if args.backend == "multiprocessing" else None
    envs = vector.make(make_corridor, num_envs=args.num_envs, num_workers=workers, backend=args.backend, seed=0)
    with envs:
        # The Dict observation arrives flattened into one array per row; unflatten gives it back.
        obs, infos = envs.reset()
        print(f"observation rows {obs.shape} {obs.dtype}, actions {envs.single_action_space}")
        # Each row holds the Dict's leaves as bytes, laid out by one numpy structured dtype.
        for name, (leaf, offset) in envs.driver_env.obs_dtype.fields.items():
            print(f"  bytes {offset}-{offset + leaf.itemsize - 1}: {name!r}, {leaf.base} {leaf.shape}")
        print(f"  ({obs.shape[1]} bytes a row: a gap is padding that keeps the next leaf aligned)")
        print("positions at reset:", envs.unflatten_observation(obs)["position"].ravel())
        rng = np.random.default_rng(0)
        returns, lengths = [], []
        start = time.perf_counter()
        for _ in range(args.steps):
            actions = rng.integers(0, 2, envs.num_envs)
            obs, rewards, terminals, truncations, infos = envs.step(actions)
            for info in infos:  # non-empty infos only: here, the end of an episode
                if "episode_return" in info:
                    returns.append(info["episode_return"])
                    lengths.append(info["episode_length"])
        seconds = time.perf_counter() - start
    print(f"{args.steps * envs.num_envs / seconds:,.0f} steps/s on {args.backend}")
    if returns:
        print(f"{len(returns)} episodes: mean return {np.mean(returns):.2f}, mean length {np.mean(lengths):.1f}")


if __name__ == "__main__":
    main()
