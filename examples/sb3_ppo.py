"""Stable-Baselines3's PPO training on Puffer Core's Multiprocessing vector env, through
``puffer_core.vector.to_sb3``.

Needs torch and Stable-Baselines3: ``pip install 'puffer-core[sb3]'`` (install a CPU torch
first to avoid a CUDA download). Run: ``python examples/sb3_ppo.py`` (``--timesteps 1024``
for a quick look); on CartPole the default 50,000 steps reach a mean return of about 250
(a random policy's is about 22); the script prints how long they took.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from stable_baselines3 import PPO

from puffer_core import vector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=50_000, help="environment steps to train for")
    parser.add_argument("--env", default="classic/cartpole", help="a registered env id (puffer envs lists them)")
    args = parser.parse_args()
    # SB3 resets an ended env within the step: autoreset="same_step" gives it that, and
    # to_sb3 puts the final observation and the episode's stats into SB3's infos.
    envs = vector.make(args.env, num_envs=8, num_workers=2, backend="multiprocessing", seed=0, autoreset="same_step")
    venv = vector.to_sb3(envs)
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=256, seed=0, verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    seconds = time.perf_counter() - start
    returns = [episode["r"] for episode in model.ep_info_buffer]  # SB3's last 100 episodes
    print(f"trained {model.num_timesteps} steps in {seconds:.1f} s ({model.num_timesteps / seconds:,.0f} steps/s)")
    if returns:
        print(f"{len(returns)} recent episodes: mean return {np.mean(returns):.1f}")
    venv.close()


if __name__ == "__main__":
    main()
