"""A CleanRL-style loop over ``puffer_core.vector.to_gymnasium``: Puffer Core's vector env as
a ``gymnasium.vector.VectorEnv`` (infos as dicts of arrays with ``_key`` masks).

The policy is linear and numpy-only: each env row tries its own weights for one episode,
and every new try perturbs the best weights found so far (random search). No torch needed.
Run: ``python examples/cleanrl_loop.py`` (``--steps 200`` for a quick look).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from puffer_core import vector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="vector steps to take")
    parser.add_argument("--num-envs", type=int, default=8)
    args = parser.parse_args()
    puffer_envs = vector.make("classic/cartpole", num_envs=args.num_envs, num_workers=2, backend="multiprocessing")
    envs = vector.to_gymnasium(puffer_envs)  # the default autoreset "next_step", as Gymnasium's own
    print(f"{type(envs).__name__}: {envs.num_envs} envs, autoreset {envs.metadata['autoreset_mode'].name}")
    rng = np.random.default_rng(0)
    size = envs.single_observation_space.shape[0]
    best_weights, best_return = np.zeros(size), -np.inf
    weights = rng.normal(size=(envs.num_envs, size))  # one candidate per env row
    returns = []
    obs, infos = envs.reset(seed=0)
    start = time.perf_counter()
    for step in range(args.steps):
        actions = ((obs * weights).sum(axis=1) > 0).astype(np.int64)
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        # Episode stats arrive in the step an episode ends, masked by "_episode_return".
        for row in np.flatnonzero(infos.get("_episode_return", [])):
            episode_return = float(infos["episode_return"][row])
            returns.append(episode_return)
            if episode_return > best_return:
                best_weights, best_return = weights[row].copy(), episode_return
            weights[row] = best_weights + rng.normal(scale=0.5, size=size)
        if step % 500 == 0 and returns:
            print(f"step {step}: {len(returns)} episodes, best return {best_return:.0f}")
    seconds = time.perf_counter() - start
    envs.close()
    print(f"{args.steps * envs.num_envs / seconds:,.0f} steps/s; {len(returns)} episodes")
    if returns:
        print(f"mean return of the last 10 episodes {np.mean(returns[-10:]):.1f}, best {best_return:.0f}")


if __name__ == "__main__":
    main()
