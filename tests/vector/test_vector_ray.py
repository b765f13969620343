"""The Ray backend on a real local Ray instance (2 CPUs, no dashboard)."""

from __future__ import annotations

import builtins
import functools
import gc
import ipaddress
import json
import os
import select
import socket
import subprocess
import sys
import time
import weakref
from pathlib import Path

import gymnasium
import numpy as np
import psutil
import pytest

from puffer_core import vector
from puffer_core.errors import APIUsageError, MissingDependencyError, WorkerError
from puffer_core.testing import FaultEnv, TinyParallelEnv, rollout

OWN_INSTANCE = Path(__file__).with_name("ray_own_instance.py")
# Asks the GCS at argv[1] for its keys with whatever token this process's environment gives it.
GCS_CLIENT = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_keys(b"", namespace=None, timeout=10)
    print("answered")
except Exception as exc:
    print("refused", type(exc).__name__)
"""


def cartpole():
    return gymnasium.make("CartPole-v1")


@pytest.mark.ray
def test_ray_matches_serial_and_multiprocessing(local_ray):
    with vector.make(cartpole, num_envs=5, backend="serial") as env:
        want = rollout(env, 200, seed=4)
    with vector.make(cartpole, num_envs=5, num_workers=2, backend="ray") as env:  # uneven: 3, 2
        got = rollout(env, 200, seed=4)
    with vector.make(cartpole, num_envs=5, num_workers=2, backend="multiprocessing") as env:
        mp = rollout(env, 200, seed=4)
    for key in want:
        np.testing.assert_array_equal(want[key], got[key], err_msg=key)
        np.testing.assert_array_equal(want[key], mp[key], err_msg=key)


@pytest.mark.ray
def test_ray_async_batches_multiagent_and_infos(local_ray):
    with vector.make(TinyParallelEnv, num_envs=4, num_workers=2, batch_size=2, backend="ray") as env:
        assert env.num_envs == 12 and env.batch_size == 6
        env.async_reset(20)
        seen = set()
        agents = []
        deadline = time.monotonic() + 20
        while len(seen) < 12 or not {0, 9} <= {row for row, agent in agents if agent == "agent_0"}:
            assert time.monotonic() < deadline, (seen, agents)
            obs, rew, term, trunc, infos, ids, masks = env.recv()
            assert len(ids) == 6
            np.testing.assert_array_equal(obs[masks, 3], 20 + ids[masks] // 3)  # row ↔ env (seed + env index)
            seen.update(ids.tolist())
            agents += [(i["env_id"], i["agent"]) for i in infos]
            env.send(np.ones(6, int))
    assert seen == set(range(12))
    assert (0, "agent_0") in agents and (9, "agent_0") in agents


@pytest.mark.ray
def test_ray_env_raising(local_ray):
    creator = functools.partial(FaultEnv, mode="raise", where="step", at=2, fault_seed=1)
    env = vector.make(creator, num_envs=2, num_workers=1, backend="ray")
    env.reset(seed=0)
    with pytest.raises(WorkerError) as info:
        for _ in range(5):
            env.step(np.zeros(2, int))
    assert info.value.worker == 0 and info.value.env_index == 1
    assert "deliberate failure" in info.value.cause
    env.close()
    env.close()


@pytest.mark.ray
def test_ray_hang_past_timeout(local_ray):
    creator = functools.partial(FaultEnv, mode="hang", where="step", at=2, fault_seed=1, hang_seconds=30)
    env = vector.make(creator, num_envs=2, num_workers=1, backend="ray", vector_kwargs={"timeout": 1.0})
    env.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        for _ in range(5):
            env.step(np.zeros(2, int))
    assert time.monotonic() - start < 6
    assert info.value.worker == 0 and info.value.env_index == 1 and info.value.cause == "timeout"


@pytest.mark.ray
def test_ray_actor_death(local_ray):
    creator = functools.partial(FaultEnv, mode="exit", where="step", at=2, fault_seed=1)
    env = vector.make(creator, num_envs=2, num_workers=1, backend="ray")
    env.reset(seed=0)
    with pytest.raises(WorkerError) as info:
        for _ in range(5):
            env.step(np.zeros(2, int))
    assert info.value.worker == 0 and "died" in str(info.value)


def test_missing_ray_is_explained(monkeypatch):
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(MissingDependencyError, match=r"pip install 'puffer-core\[ray\]'"):
        vector.make(cartpole, num_envs=2, backend="ray")


def test_allow_unauthenticated_ray_must_be_a_bool():
    with pytest.raises(APIUsageError, match=r"^vector_kwargs\['allow_unauthenticated_ray'\] must be True or False"):
        vector.make(cartpole, num_envs=2, backend="ray", vector_kwargs={"allow_unauthenticated_ray": "no"})


@pytest.mark.ray
def test_vector_env_dropped_without_close_kills_its_actors(local_ray):
    env = vector.make(cartpole, num_envs=2, num_workers=2, backend="ray")
    env.reset(seed=0)
    # Handles of our own: without them Ray would collect the actors once the env's handles go.
    actors = list(env._actors)
    assert len(local_ray.get([actor.where.remote() for actor in actors], timeout=30)) == 2  # alive
    dropped = weakref.ref(env)
    del env
    gc.collect()
    assert dropped() is None  # the finalizer does not keep the vector env alive
    for actor in actors:
        with pytest.raises(local_ray.exceptions.RayActorError):
            local_ray.get(actor.where.remote(), timeout=30)


def _clean_env(home: Path, **extra: str) -> dict:
    """This process's environment without Ray's address, auth and binding settings; ``HOME`` set."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    home.mkdir(exist_ok=True)
    return {**env, "HOME": str(home), **extra}


def _result(proc: subprocess.Popen, timeout: float) -> dict:
    """The ``RESULT <json>`` line the helper prints, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(f"the helper gave no result within {timeout:g} s (exit code {proc.poll()})")


def _stop(proc: subprocess.Popen, session_dir: str | None) -> None:
    """The helper ended (Ray shut down with it); any Ray process it left behind killed."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    for leftover in _session_processes(proc.pid, session_dir, with_children=False):
        leftover.kill()


def _session_processes(pid: int, session_dir: str | None, with_children: bool = True) -> list:
    """The helper and every Ray process of its instance: its descendants, and whatever names
    the instance's session dir on its command line."""
    found = {}
    if with_children:
        try:
            helper = psutil.Process(pid)
            found = {p.pid: p for p in [helper, *helper.children(recursive=True)]}
        except psutil.NoSuchProcess:
            pass
    for process in psutil.process_iter(["cmdline"]):
        if session_dir and session_dir in " ".join(process.info["cmdline"] or []):
            found.setdefault(process.pid, process)
    return list(found.values())


def _own_instance(tmp_path: Path, mode: str, **env: str) -> subprocess.Popen:
    """The helper script in ``mode`` ("serve", "refuse"), with a clean environment of its own HOME."""
    return subprocess.Popen(
        [sys.executable, str(OWN_INSTANCE), mode],
        env=_clean_env(tmp_path / "home", **env),
        stdin=subprocess.PIPE if mode == "serve" else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "stderr", "w"),
        text=True,
    )


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return (ip.ipv4_mapped or ip).is_loopback if ip.version == 6 else ip.is_loopback


@pytest.mark.ray
def test_own_ray_instance_listens_on_loopback_and_wants_the_token(tmp_path):
    # A token a former Ray left readable by everyone (Ray writes it with the umask): never reused.
    leaked = "0" * 64
    (tmp_path / "home" / ".ray").mkdir(parents=True, mode=0o755)
    (tmp_path / "home" / ".ray" / "auth_token").write_text(leaked)
    (tmp_path / "home" / ".ray" / "auth_token").chmod(0o644)
    proc = _own_instance(tmp_path, "serve")
    result: dict = {}
    try:
        result.update(_result(proc, 180))
        session_dir = result["session_dir"]

        listening = {}
        for process in _session_processes(proc.pid, session_dir):
            try:
                name = process.name()
                for conn in process.net_connections("inet"):
                    if conn.status == psutil.CONN_LISTEN or conn.type == socket.SOCK_DGRAM:  # TCP listening, UDP
                        listening[(conn.laddr.ip, conn.laddr.port)] = name
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                pass
        gcs_port = int(result["gcs_address"].rsplit(":", 1)[1])
        names = set(listening.values())
        assert gcs_port in {port for _, port in listening}, listening
        assert {"gcs_server", "raylet"} <= names and len(names) >= 4, listening  # and the driver, agents, actors
        exposed = {address: name for address, name in listening.items() if not _is_loopback(address[0])}
        assert not exposed, f"listening beyond loopback: {exposed}"
        assert _is_loopback(result["node_ip"]), result

        # Token authentication: the GCS refuses a client without the token, answers one with it.
        assert result["auth_on"], result
        assert result["token"] != leaked and len(result["token"]) == 64
        assert (result["token_mode"], result["ray_dir_mode"]) == (0o600, 0o700), result
        # Ray's sockets, session files and logs: in a directory of this user's only, not /tmp/ray.
        assert (result["temp_dir_mode"], result["temp_dir_uid"]) == (0o700, os.getuid()), result
        assert (
            Path(session_dir).parent.parent == Path(result["temp_dir"])
            and Path("/tmp/ray") not in Path(session_dir).parents
        )
        stranger = _clean_env(tmp_path / "stranger")
        owner = _clean_env(tmp_path / "owner", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=result["token"])
        for env, want in [(stranger, "refused AuthenticationError"), (owner, "answered")]:
            client = subprocess.run(
                [sys.executable, "-c", GCS_CLIENT, result["gcs_address"]],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert client.stdout.strip() == want, client.stderr[-2000:]

        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(60) == 0, (tmp_path / "stderr").read_text()[-3000:]
        assert not Path(result["temp_dir"]).exists()  # removed as the process exited, after Ray
    finally:
        _stop(proc, result.get("session_dir"))


@pytest.mark.ray
def test_own_ray_instance_without_token_auth_needs_the_opt_in(tmp_path):
    proc = _own_instance(tmp_path, "refuse", RAY_AUTH_MODE="disabled")
    result: dict = {}
    try:
        result.update(_result(proc, 180))
        refusal = result["refusal"]
        assert refusal is not None and "\n" not in refusal, refusal
        assert "RAY_AUTH_MODE='disabled'" in refusal and "vector_kwargs={'allow_unauthenticated_ray': True}" in refusal
        assert not result["started"]  # refused before Ray started
        # With the opt-in it starts, unauthenticated as asked, still on loopback.
        assert not result["auth_on"] and _is_loopback(result["node_ip"]), result
        assert proc.wait(60) == 0, (tmp_path / "stderr").read_text()[-3000:]
    finally:
        _stop(proc, result.get("session_dir"))
