"""How fast one's own PufferTank container starts (a benchmark, not a test).

    python -m puffer_core.bench.tank_start [--image TAG] [--runs N] [--network none]

Three measures, each over N runs (min / median / max seconds of wall time):

- ``prompt``: ``puffer tank shell`` in a pseudo-terminal until bash shows the
  ``(puffertank)`` prompt (then ``exit``): what a user waits for;
- ``run``: ``puffer tank run --quiet -- true``, start to exit;
- ``docker``: the ``docker run ... true`` that ``run`` execs, alone: the engine's share.

The image must exist (``puffer tank build``); the target is under 3 s to the prompt.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import select
import statistics
import subprocess
import sys
import time

from puffer_core.tank.container import DEFAULT_IMAGE, RunRequest, docker_argv

PROMPT = b"(puffertank)"


def _puffer(*args: str) -> list[str]:
    return [sys.executable, "-m", "puffer_core.cli.main", "tank", *args]


def time_prompt(options: list[str], timeout: float = 60.0) -> float:
    """Seconds from starting ``puffer tank shell`` in a pty to its prompt; then it exits."""
    import pty

    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: become the shell command, on the pty
        os.execv(sys.executable, _puffer("shell", *options))
    seen = b""
    elapsed = None
    try:
        while elapsed is None:
            ready, _, _ = select.select([fd], [], [], max(0.0, timeout - (time.perf_counter() - started)))
            if not ready:
                raise TimeoutError(f"no prompt within {timeout:.0f} s; output so far: {seen[-300:]!r}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the shell ended before its prompt: {seen[-300:]!r}")
            seen += chunk
            if PROMPT in seen:
                elapsed = time.perf_counter() - started
        os.write(fd, b"exit\n")
        while True:  # drain until the container is gone
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:  # EIO: the pty closed
                break
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return elapsed


def time_command(argv: list[str]) -> float:
    """Wall seconds of one command, which must succeed."""
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def summary(name: str, seconds: list[float]) -> str:
    return (
        f"{name:<7} min {min(seconds):.2f} s  median {statistics.median(seconds):.2f} s  "
        f"max {max(seconds):.2f} s  ({len(seconds)} runs)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m puffer_core.bench.tank_start", description=__doc__.split("\n")[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"the final layer (default {DEFAULT_IMAGE})")
    parser.add_argument("--runs", type=int, default=5, help="runs of each measure (default 5)")
    parser.add_argument("--network", default="none", help="container network (default none)")
    args = parser.parse_args(argv)
    options = ["--image", args.image, "--network", args.network]
    # One untimed start first, so no measure pays for a cold page cache.
    time_command(_puffer("run", *options, "--quiet", "--", "true"))
    docker = docker_argv(
        RunRequest(image=args.image, mount=pathlib.Path.cwd(), command=("true",), user=(os.getuid(), os.getgid()),
                   network=args.network, quiet=True)
    )  # fmt: skip
    results = {
        "prompt": [time_prompt(options) for _ in range(args.runs)],
        "run": [time_command(_puffer("run", *options, "--quiet", "--", "true")) for _ in range(args.runs)],
        "docker": [time_command(docker) for _ in range(args.runs)],
    }
    print(f"image {args.image}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}")
    for name, seconds in results.items():
        print(summary(name, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
