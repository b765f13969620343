"""Run by test_vector_ray.py in a fresh Python: the Ray backend with no Ray initialised, so it
starts a Ray instance of its own. Prints one line ``RESULT <json>`` on stdout.

``serve``: a vector env on that instance; reports where it runs, its token and its temporary
directory, then waits for a line on stdin (the test inspects the live processes meanwhile)
before closing it; the process then exits (its exit removes that directory).
``refuse``: with ``RAY_AUTH_MODE=disabled`` in the environment, reports the refusal, then
starts anyway with ``allow_unauthenticated_ray=True``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import gymnasium
import numpy as np
import ray

from puffer_core import vector
from puffer_core.errors import APIUsageError
from puffer_core.vector.ray.start import token_auth_on


def cartpole():
    return gymnasium.make("CartPole-v1")


def report(**fields) -> None:
    print("RESULT " + json.dumps(fields), flush=True)


def serve() -> None:
    with vector.make(cartpole, num_envs=2, num_workers=2, backend="ray") as env:
        env.reset(seed=0)
        env.step(np.zeros(2, int))
        token_file = Path.home() / ".ray" / "auth_token"
        temp_dir = Path(ray._private.worker._global_node.get_temp_dir_path()).parent  # Ray's is 0777 inside
        report(
            session_dir=ray._private.worker._global_node.get_session_dir_path(),
            gcs_address=ray.get_runtime_context().gcs_address,
            node_ip=ray.util.get_node_ip_address(),
            auth_on=token_auth_on(),
            token=token_file.read_text().strip(),
            token_mode=token_file.stat().st_mode & 0o777,
            ray_dir_mode=token_file.parent.stat().st_mode & 0o777,
            temp_dir=str(temp_dir),
            temp_dir_mode=temp_dir.stat().st_mode & 0o777,
            temp_dir_uid=temp_dir.stat().st_uid,
        )
        sys.stdin.readline()
    ray.shutdown()


def refuse() -> None:
    try:
        vector.make(cartpole, num_envs=2, backend="ray")
        refusal = None
    except APIUsageError as exc:
        refusal = str(exc)
    started = ray.is_initialized()
    with vector.make(
        cartpole, num_envs=2, num_workers=1, backend="ray", vector_kwargs={"allow_unauthenticated_ray": True}
    ) as env:
        env.reset(seed=0)
        env.step(np.zeros(2, int))
        report(
            refusal=refusal,
            started=started,
            session_dir=ray._private.worker._global_node.get_session_dir_path(),
            node_ip=ray.util.get_node_ip_address(),
            auth_on=token_auth_on(),
        )
    ray.shutdown()


if __name__ == "__main__":
    os.umask(0o022)  # as on most systems: files Ray writes are world-readable unless made private
    {"serve": serve, "refuse": refuse}[sys.argv[1]]()
