"""puffer_core.testing.simulated_ray_cluster: three Ray nodes on this machine, each service on
loopback only, token authentication on, and nothing left once it is shut down."""

from __future__ import annotations

import ipaddress
import os

import psutil
import pytest

from puffer_core.testing import simulated_ray_cluster

pytestmark = [pytest.mark.ray, pytest.mark.ray_cluster]


def ray_processes() -> set[int]:
    """This process's descendants (the nodes' services and workers are among them)."""
    return {child.pid for child in psutil.Process().children(recursive=True)}


def listening(pids: set[int]) -> set[str]:
    """The addresses the processes ``pids`` listen on."""
    found = set()
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind="inet")
        except psutil.Error:
            continue
        found |= {c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN}
    return found


def test_three_nodes_on_loopback_with_token_authentication_and_nothing_left_after():
    import ray

    if ray.is_initialized():  # an earlier test's Ray: the cluster is joined from this process below
        ray.shutdown()
    before = ray_processes()
    environment = {name: os.environ.get(name) for name in ("RAY_AUTH_MODE", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    with simulated_ray_cluster(3, cpus_per_node=2, resources=[{}, {}, {"third": 1}]) as cluster:
        address = cluster.address
        assert ipaddress.ip_address(address.rsplit(":", 1)[0]).is_loopback
        ray.init(address=address, log_to_driver=False)
        try:
            from ray._raylet import AuthenticationMode, get_authentication_mode

            assert get_authentication_mode() == AuthenticationMode.TOKEN
            nodes = [node for node in ray.nodes() if node["Alive"]]
            assert len(nodes) == 3 and {node["NodeManagerAddress"] for node in nodes} == {"127.0.0.1"}
            assert ray.cluster_resources()["CPU"] == 6 and ray.cluster_resources()["third"] == 1
            started = ray_processes() - before
            addresses = {ipaddress.ip_address(ip.removeprefix("::ffff:")) for ip in listening(started)}
            assert addresses and all(ip.is_loopback for ip in addresses), addresses
        finally:
            ray.shutdown()
    processes = []
    for pid in started:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=30)
    assert [process for process in alive if process.status() != psutil.STATUS_ZOMBIE] == []
    assert {name: os.environ.get(name) for name in environment} == environment
