"""Puffer Core's Ray backend: the envs run in Ray actors, on this machine or over a cluster.

By default Puffer Core starts a Ray instance of its own on this machine (loopback only, with
Ray's token). For a cluster, start a head (``ray start --head --port 6379``), join the other
boxes (``ray start --address HEAD:6379``) and pass ``--address HEAD:6379`` here, from a box of
the cluster; ``--placement spread`` puts the workers on as many nodes as it can.
Needs Ray: ``pip install 'puffer-core[ray]'``. Run: ``python examples/ray_cluster.py``
(``--steps 100`` for a quick look).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from puffer_core import vector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="vector steps to take")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=2, help="Ray actors, each stepping its share of the envs")
    parser.add_argument("--address", default=None, help="the cluster's head, HOST:PORT (default: a local Ray)")
    parser.add_argument("--placement", default=None, choices=["spread", "pack"])
    args = parser.parse_args()
    envs = vector.make(
        "classic/cartpole",
        num_envs=args.num_envs,
        num_workers=args.num_workers,
        backend="ray",
        seed=0,
        on_fault="restart",  # a worker lost with its node comes back elsewhere; its rows end truncated
        vector_kwargs={"address": args.address, "placement": args.placement},
    )
    with envs:
        for worker in envs.placement:  # where each actor runs, as it reports from inside
            print(f"worker {worker['worker']}: envs {worker['envs']} on {worker['host']} ({worker['address']})")
        envs.reset()
        rng = np.random.default_rng(0)
        episodes = 0
        start = time.perf_counter()
        for _ in range(args.steps):
            _, _, terminals, truncations, _ = envs.step(rng.integers(0, 2, envs.num_envs))
            episodes += int(np.sum(terminals | truncations))
        seconds = time.perf_counter() - start
        traffic = envs.stats["traffic"]  # what crossed between this process and the actors
    print(f"{args.steps * envs.num_envs / seconds:,.0f} steps/s on Ray, {episodes} episodes ended")
    calls = sum(worker["calls"] for worker in traffic["workers"])  # round trips to an actor
    sent, received = traffic["sent_bytes"] / calls, traffic["received_bytes"] / calls
    print(f"traffic per round trip to an actor: {sent:.0f} B sent, {received:.0f} B back")


if __name__ == "__main__":
    main()
