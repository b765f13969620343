"""A peer's bench row in another interpreter (``puffer bench --peer-python PY``): EnvPool
installs in an environment of its own, so this file runs there as a script, importing only
the standard library, numpy and the peer's package, never puffer_core.

    PY peer_worker.py '{"library": "envpool", "task": "Breakout-v5", "num_envs": 8,
                        "batch_size": 4, "num_threads": 2, "seed": 0, "options": {...}}'

It builds the env, then answers one JSON line per request on stdin: ``{"measure": SECONDS,
"warmup": SECONDS}`` → ``{"sps": STEPS_PER_SECOND}`` (the envs stepped with random actions
through ``send``/``recv``, EnvPool's asynchronous API, as ``puffer bench`` times ours);
``{"close": true}`` or the end of stdin closes it. Its first line is ``{"ready": true,
"version": ...}`` or ``{"error": ...}``.
"""

import json
import sys
import time


def _make(config):
    if config["library"] != "envpool":
        raise ValueError(f"no peer library {config['library']!r} (this script knows envpool)")
    import envpool

    env = envpool.make(
        config["task"],
        env_type="gymnasium",
        num_envs=config["num_envs"],
        batch_size=config["batch_size"],
        num_threads=config["num_threads"],
        seed=config["seed"],
        **config.get("options", {}),
    )
    return env, envpool.__version__


def _steps_per_second(env, seconds, warmup, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    n_actions = env.action_space.n
    env.async_reset()
    steps, started, deadline = 0, None, time.perf_counter() + warmup
    while True:
        now = time.perf_counter()
        if started is None and now >= deadline:
            started, steps, deadline = now, 0, now + seconds
        elif started is not None and now >= deadline:
            return steps / (now - started)
        *_, info = env.recv()
        ids = info["env_id"]
        env.send(rng.integers(0, n_actions, len(ids)), ids)
        steps += len(ids)


def main():
    config = json.loads(sys.argv[1])
    try:
        env, version = _make(config)
    except Exception as exc:  # reported to the bench as the row's error, in one line
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(json.dumps({"ready": True, "version": version}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("close"):
            break
        sps = _steps_per_second(env, request["measure"], request["warmup"], config["seed"])
        print(json.dumps({"sps": sps}), flush=True)
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
