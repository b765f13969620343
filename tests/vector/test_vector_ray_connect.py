"""Which Ray the Ray backend connects to (:mod:`puffer_core.vector.ray.connect`): bad
addresses and Ray-only settings are one line, fast. Each connection attempt runs in a fresh
Python of its own: Ray is one per process, and this one may have Ray initialised already."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import gymnasium
import pytest

from puffer_core import vector
from puffer_core.errors import APIUsageError

# Prints the one-line error vector.make raises for the address in argv[1], as JSON.
ATTEMPT = """
import json, sys, time
import gymnasium
from puffer_core import vector
start = time.monotonic()
try:
    vector.make(lambda: gymnasium.make("CartPole-v1"), num_envs=1, backend="ray",
                vector_kwargs={"address": sys.argv[1]}).close()
    print(json.dumps({"error": None}))
except Exception as exc:
    print(json.dumps({"error": str(exc), "type": type(exc).__name__, "seconds": time.monotonic() - start}))
"""


def cartpole():
    return gymnasium.make("CartPole-v1")


def attempt(address: str, **env: str) -> dict:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    done = subprocess.run(
        [sys.executable, "-c", ATTEMPT, address], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.ray  # a real Ray answers the attempt
def test_an_unreachable_address_is_one_line_naming_it_and_how_to_start_a_head():
    address = f"127.0.0.1:{closed_port()}"
    for given in (address, f"ray://{address}"):
        result = attempt(given)
        assert result["type"] == "RayConnectionError", result
        message = result["error"]
        assert "\n" not in message and address in message and "ray start --head --port 6379" in message
        assert "puffer tank run -- ray start --head" in message
        assert result["seconds"] < 30  # a closed port answers at once; bounded either way


@pytest.mark.ray
@pytest.mark.ray_absent  # runs before the other Ray tests start theirs
def test_auto_with_no_cluster_is_one_line(tmp_path):
    from ray._private.services import find_gcs_addresses

    if find_gcs_addresses():  # Ray's 'auto' looks at every process of the machine
        pytest.skip(f"a Ray instance runs on this machine ({sorted(find_gcs_addresses())}): 'auto' would find it")
    result = attempt("auto", RAY_TMPDIR=str(tmp_path))  # no `ray start` recorded there
    assert result["type"] == "RayConnectionError", result
    assert "\n" not in result["error"] and "'auto' found no running Ray cluster" in result["error"]
    assert "ray start --head" in result["error"]


@pytest.mark.parametrize("key, value", [("placement", "spread"), ("address", "auto")])
@pytest.mark.parametrize("backend", ["multiprocessing", "serial"])
def test_ray_settings_on_another_backend_are_refused(key, value, backend):
    with pytest.raises(APIUsageError) as info:
        vector.make(cartpole, num_envs=2, backend=backend, vector_kwargs={key: value})
    message = str(info.value)
    assert "\n" not in message and repr(key) in message and "a Ray setting" in message
    assert "backend='ray'" in message


@pytest.mark.ray  # imports Ray to show it was never initialised
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"placement": "wide"}, "'spread', 'pack' or None"),
        ({"address": "head"}, "'host:port' or 'ray://host:port'"),
        ({"address": "head:99999"}, "not a TCP port"),
        ({"placement": "spread", "actor_options": {"scheduling_strategy": "SPREAD"}}, "drop"),
        ({"placement": "pack", "actor_options": {"num_cpus": 0}}, "positive number"),
    ],
)
def test_bad_ray_settings_are_refused_before_ray_starts(kwargs, match):
    import ray

    was_initialised = ray.is_initialized()
    with pytest.raises(APIUsageError, match=match):
        vector.make(cartpole, num_envs=2, backend="ray", vector_kwargs=kwargs)
    assert ray.is_initialized() == was_initialised  # refused before connecting to, or starting, any Ray
