"""What a NetHack policy costs the learner on a CPU, per observation-key set and hidden size.

For each setting: milliseconds for one forward pass over 64 rows (a rollout step of 64 envs)
and for one PPO-sized training step (forward, backward, Adam) over a minibatch of 1,024 rows,
single-threaded as `puffer train` runs MLP policies. It chose the NetHack plugin's training
observation (the 9x9 crop and blstats, not the whole 21x79 map) and its hidden size.

    python experiments/nethack_learning/encoder_cost.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import puffer_core
from puffer_core.train.policy import Policy

SETTINGS = [
    (("glyphs_crop", "blstats"), 128),
    (("glyphs_crop", "blstats"), 256),
    (("glyphs", "glyphs_crop", "blstats"), 128),
    (("glyphs", "blstats"), 128),
    (("blstats",), 128),
]


def cost(keys: tuple[str, ...], hidden: int, repeats: int) -> tuple[int, float, float]:
    env = puffer_core.make("nethack/score", observation_keys=keys)
    policy = Policy(env.obs_layout, env.action_space, hidden)
    obs, _ = env.reset(seed=0)
    env.close()
    rows = torch.from_numpy(np.stack([obs] * 64))
    with torch.no_grad():
        policy(rows)[0].sample()
        started = time.perf_counter()
        for _ in range(repeats * 10):
            policy(rows)[0].sample()
        infer = (time.perf_counter() - started) / (repeats * 10)
    batch = torch.from_numpy(np.stack([obs] * 1024))
    optimizer = torch.optim.Adam(policy.parameters())
    started = time.perf_counter()
    for _ in range(repeats):
        distribution, value = policy(batch)
        loss = distribution.entropy().mean() + value.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    train = (time.perf_counter() - started) / repeats
    return sum(p.numel() for p in policy.parameters()), infer * 1e3, train * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("keys | hidden | parameters | forward, 64 rows (ms) | train step, 1,024 rows (ms)")
    for keys, hidden in SETTINGS:
        params, infer, train = cost(keys, hidden, args.repeats)
        print(f"{'+'.join(keys)} | {hidden} | {params:,} | {infer:.1f} | {train:.0f}")


if __name__ == "__main__":
    main()
