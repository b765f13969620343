"""Record a policy's episodes: ``vector.make(..., record="cartpole.mp4")`` makes env 0 write
every episode it plays to an MP4 (or a ``.gif``; a text env such as NetHack records to an
asciinema ``.cast``). The file appears, whole, when the vector env closes.

Needs the record extra (imageio, its ffmpeg, and the pygame CartPole renders with): ``pip install -e
'.[record]'`` in the checkout. Run: ``python examples/record_policy.py``
(``--policy random --out cartpole.gif`` for two short episodes as a GIF). The CLI records
a random policy the same way: ``puffer run classic/cartpole --record run.mp4 --record-episodes 2``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from puffer_core import vector


def balance(obs: np.ndarray) -> np.ndarray:
    """Push the cart towards the side the pole falls to (pole angle and angular velocity)."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="cartpole.mp4", help="the recording: .mp4 or .gif")
    parser.add_argument("--episodes", type=int, default=2, help="env 0's episodes to play")
    parser.add_argument("--policy", default="balance", choices=["balance", "random"])
    args = parser.parse_args()
    Path(args.out).unlink(missing_ok=True)  # a recording never replaces a file by itself
    rng = np.random.default_rng(0)
    envs = vector.make("classic/cartpole", num_envs=4, backend="serial", seed=0, record=args.out)
    returns = []
    with envs:  # closing the vector env finishes the file
        obs, _ = envs.reset()
        while len(returns) < args.episodes:
            actions = balance(obs) if args.policy == "balance" else rng.integers(0, 2, envs.num_envs)
            obs, _, _, _, infos = envs.step(actions)
            # Only env 0 records: count its episodes ("env_id" is the row an info belongs to).
            returns += [info["episode_return"] for info in infos if info["env_id"] == 0 and "episode_return" in info]
    size = Path(args.out).stat().st_size
    print(f"recorded {len(returns)} episodes (returns {', '.join(f'{r:.0f}' for r in returns)}) to {args.out}")
    print(f"{args.out}: {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
