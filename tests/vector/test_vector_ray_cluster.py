"""The Ray backend on a simulated three-node cluster (``ray.cluster_utils.Cluster`` on this
machine, two CPUs per node): placement, ``envs.placement``, traffic, a node lost mid-run,
and nothing left behind."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
import ray_node_env
from test_vector_ray_connect import ATTEMPT

from puffer_core import vector
from puffer_core.errors import APIUsageError, WorkerError

pytestmark = [pytest.mark.ray, pytest.mark.ray_cluster]

STEPS = 30
NODE = {"num_cpus": 2, "node_ip_address": "127.0.0.1"}  # as the ray_cluster fixture's nodes
LOSE_AT = 12


@pytest.fixture(scope="module")
def cluster(ray_cluster):
    """The cluster; the test env travels to the actors by value (Ray workers cannot import
    test modules). Every test leaves it with three nodes."""
    import ray

    ray.cloudpickle.register_pickle_by_value(ray_node_env)
    yield ray_cluster


def make(cluster, num_envs=3, num_workers=3, **kwargs):
    """The test env on the cluster, once the resources an earlier test held are free again
    (a placement group's removal frees its bundles asynchronously)."""
    settle()
    vector_kwargs = {"address": cluster.address, **kwargs.pop("vector_kwargs", {})}
    return vector.make(
        ray_node_env.NodeCartPole,
        num_envs=num_envs,
        num_workers=num_workers,
        backend="ray",
        vector_kwargs=vector_kwargs,
        **kwargs,
    )


def settle() -> None:
    import ray

    if not ray.is_initialized():
        return
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
        assert time.monotonic() < deadline, (ray.available_resources(), ray.cluster_resources())
        time.sleep(0.1)


def alive_nodes() -> set[str]:
    import ray

    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def removable(cluster, envs) -> tuple:
    """A worker node (never the one this driver is attached to) holding some worker: the node
    and the workers on it."""
    import ray

    driver_node = ray.get_runtime_context().get_node_id()
    for node in cluster.worker_nodes:
        lost = [p["worker"] for p in envs.placement if p["node_id"] == node.node_id]
        if lost and node.node_id != driver_node:
            return node, lost
    raise AssertionError(f"no removable node holds a worker: {envs.placement}")


def restore(cluster, nodes: int = 3) -> None:
    """Add nodes back until the cluster has ``nodes`` again."""
    while len(alive_nodes()) < nodes:
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()


def actions_at(t: int, rows: int) -> np.ndarray:
    return (np.arange(rows) + t) % 2


def run(envs, lose=None) -> tuple[dict, list]:
    """STEPS fixed-action steps from seed 0; ``lose()`` runs before step LOSE_AT. Returns
    the stacked arrays and every step's infos."""
    obs, _ = envs.reset(seed=0)
    out = {"obs": [obs.copy()], "rewards": [], "terminals": [], "truncations": []}
    infos = []
    for t in range(STEPS):
        if t == LOSE_AT and lose is not None:
            lose()
        obs, rewards, terminals, truncations, info = envs.step(actions_at(t, envs.num_envs))
        for key, value in zip(out, (obs, rewards, terminals, truncations)):
            out[key].append(value.copy())
        infos.append(info)
    return {key: np.array(value) for key, value in out.items()}, infos


def test_spread_puts_each_worker_on_a_node_of_its_own(cluster):
    with make(cluster, vector_kwargs={"placement": "spread"}) as envs:
        envs.reset(seed=0)
        reported = list(envs.get_attr("node_id"))  # from inside each env's process
        assert len(set(reported)) == 3 and set(reported) <= alive_nodes()
        placement = envs.placement
        assert [p["worker"] for p in placement] == [0, 1, 2]
        assert [p["envs"] for p in placement] == [[0], [1], [2]]
        assert [p["node_id"] for p in placement] == reported
        assert all(p["host"] and p["address"] for p in placement)


def test_pack_uses_as_few_nodes_as_the_resources_allow(cluster):
    # Bundles of one CPU on nodes of two: three workers need two nodes.
    with make(cluster, num_envs=6, vector_kwargs={"placement": "pack"}) as envs:
        envs.reset(seed=0)
        assert len(set(envs.get_attr("node_id"))) == 2
        assert {p["node_id"] for p in envs.placement} == set(envs.get_attr("node_id"))
    # Half a CPU each: all three fit on one node.
    with make(cluster, vector_kwargs={"placement": "pack", "actor_options": {"num_cpus": 0.5}}) as envs:
        envs.reset(seed=0)
        assert len(set(envs.get_attr("node_id"))) == 1


def test_traffic_counts_every_round_trip(cluster):
    with make(cluster, num_envs=4, num_workers=2, vector_kwargs={"placement": "spread"}) as envs:
        envs.reset(seed=0)
        for t in range(5):
            envs.step(actions_at(t, 4))
        traffic = envs.stats["traffic"]
    rows = 2  # per worker
    obs_bytes = rows * 4 * 4  # CartPole: 4 float32
    answer = obs_bytes + rows * (4 + 1 + 1 + 1)  # rewards float32, terminals, truncations, masks
    for worker in traffic["workers"]:
        assert worker["calls"] == 6  # a reset and five steps
        assert worker["sent_bytes"] > 5 * rows * 8  # five action arrays of int64, and the reset plan
        assert worker["received_bytes"] >= 6 * answer
    assert traffic["sent_bytes"] == sum(w["sent_bytes"] for w in traffic["workers"])
    assert traffic["received_bytes"] == sum(w["received_bytes"] for w in traffic["workers"])


def test_close_leaves_no_actor_or_placement_group(cluster):
    import ray

    def ours(envs):
        return [actor._actor_id.hex() for actor in envs._actors], envs._placement.group.id.hex()

    def gone(actor_ids, group_id):
        # The GCS's actor table (Ray's state API needs the dashboard, which this cluster runs
        # without): no actor of our class left that is not dead, on any node.
        from ray._private.state import actors

        deadline = time.monotonic() + 30  # ray.kill is asynchronous: the cluster's tables follow
        while True:
            table = actors().values()
            alive = {a["ActorID"] for a in table if a["ActorClassName"].endswith("EnvActor") and a["State"] != "DEAD"}
            group = ray.util.placement_group_table()[group_id]["state"]
            if (not set(actor_ids) & alive and group == "REMOVED") or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not set(actor_ids) & alive and group == "REMOVED", (alive, group)

    envs = make(cluster, vector_kwargs={"placement": "spread"})
    envs.reset(seed=0)
    actor_ids, group_id = ours(envs)
    assert ray.util.placement_group_table()[group_id]["state"] == "CREATED"
    envs.close()
    gone(actor_ids, group_id)

    envs = make(cluster, vector_kwargs={"placement": "pack"})  # dropped without close()
    actor_ids, group_id = ours(envs)
    dropped = weakref.ref(envs)
    del envs
    gc.collect()
    assert dropped() is None
    gone(actor_ids, group_id)


@pytest.mark.parametrize("placement", ["spread", None])
def test_a_node_lost_mid_run_is_replaced(cluster, placement):
    extra = {"num_envs": 6, "seed": 0, "on_fault": "restart", "vector_kwargs": {"placement": placement}}
    if placement is None:  # Ray's default scheduling, no placement group
        # SPREAD alone is best effort: it once put all three actors on the driver's node. At
        # one CPU each, that node (two CPUs) cannot hold them all, so one is always removable;
        # the two nodes left after the loss still have room for the replacements.
        extra["vector_kwargs"] = {"actor_options": {"scheduling_strategy": "SPREAD", "num_cpus": 1}}
    with make(cluster, **extra) as envs:
        want, _ = run(envs)  # nothing lost
    with make(cluster, **extra) as envs:
        victim = {}

        def lose():
            node, lost = removable(cluster, envs)
            victim.update(node=node.node_id, workers=lost, placement=envs.placement)
            cluster.remove_node(node)

        got, infos = run(envs, lose)
        stats, placement_after = envs.stats, envs.placement
    restore(cluster)

    lost_envs = [env for w in victim["workers"] for env in victim["placement"][w]["envs"]]
    faults = [(t, info["env_id"], info["fault"]) for t, step in enumerate(infos) for info in step if "fault" in info]
    assert sorted(env for _, env, _ in faults) == sorted(lost_envs)  # each lost worker's envs, once
    assert {t for t, _, _ in faults} == {LOSE_AT}
    for _, _, fault in faults:
        assert fault["node"]["node_id"] == victim["node"] and victim["node"] in fault["cause"]
        assert fault["node"]["host"] in fault["cause"]
    assert stats["faults"] == stats["restarts"] == len(victim["workers"])
    for w in victim["workers"]:
        assert placement_after[w]["node_id"] != victim["node"] and placement_after[w]["node_id"] in alive_nodes()
    kept = [env for env in range(6) if env not in lost_envs]
    for key in want:
        np.testing.assert_array_equal(want[key][:, kept], got[key][:, kept], err_msg=key)
    assert got["truncations"][LOSE_AT, lost_envs].all()


def test_a_node_lost_during_a_step_is_replaced(cluster):
    # The lost worker's step is in flight when its node goes: Ray's error, not a fresh actor.
    options = {"placement": "spread"}
    with make(cluster, num_envs=3, seed=0, on_fault="restart", vector_kwargs=options) as envs:
        envs.reset(seed=0)
        node, lost = removable(cluster, envs)
        envs.set_attr("pause", 10.0, env_indices=lost)  # one env per worker: env w is worker w's
        envs.send(actions_at(0, 3))
        cluster.remove_node(node)
        _, _, _, truncations, infos, _, _ = envs.recv()
        faults = [(info["env_id"], info["fault"]) for info in infos if "fault" in info]
        assert sorted(env for env, _ in faults) == lost and truncations[lost].all()  # each once
        assert all(f["node"]["node_id"] == node.node_id and f["phase"] == "step" for _, f in faults)
        assert envs.stats["restarts"] == len(lost)
    restore(cluster)


def test_a_node_lost_under_raise_is_named(cluster):
    with make(cluster, num_envs=3, seed=0, vector_kwargs={"placement": "spread"}) as envs:
        envs.reset(seed=0)
        node, lost = removable(cluster, envs)
        host = envs.placement[lost[0]]["host"]
        cluster.remove_node(node)
        with pytest.raises(WorkerError) as info:
            for t in range(5):
                envs.step(actions_at(t, 3))
    restore(cluster)
    message = str(info.value)
    assert node.node_id in message and host in message and "\n" not in message
    assert f"worker(s) {', '.join(map(str, lost))}" in message and info.value.cause == "node lost"


def test_a_node_lost_with_no_room_left_is_a_worker_error(cluster):
    # Each bundle fills a node: the lost worker has nowhere to go. The startup timeout is also
    # how long the first actors may take to start: seconds on a loaded 2-core machine.
    options = {"placement": "spread", "actor_options": {"num_cpus": 2}, "startup_timeout": 15.0, "timeout": 15.0}
    with make(cluster, num_envs=3, seed=0, on_fault="restart", vector_kwargs=options) as envs:
        envs.reset(seed=0)
        node, lost = removable(cluster, envs)
        cluster.remove_node(node)
        with pytest.raises(WorkerError) as info:
            for t in range(5):
                envs.step(actions_at(t, 3))
    restore(cluster)
    message = str(info.value)
    assert "found no room" in message and node.node_id in message and "{'CPU': 2}" in message
    assert "\n" not in message


def test_a_node_that_comes_back_is_used_again(cluster):
    # Lose a node, add one, lose another: the lost workers go to the node added.
    options = {"placement": "spread"}
    with make(cluster, num_envs=3, seed=0, on_fault="restart", vector_kwargs=options) as envs:
        envs.reset(seed=0)
        cluster.remove_node(removable(cluster, envs)[0])
        for t in range(3):
            envs.step(actions_at(t, 3))
        added = cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        node, lost = removable(cluster, envs)
        cluster.remove_node(node)
        for t in range(3):
            envs.step(actions_at(t, 3))
        assert envs.stats["restarts"] == envs.stats["faults"] >= 2
        assert added.node_id in {envs.placement[w]["node_id"] for w in lost}
    restore(cluster)


def test_placement_the_cluster_can_never_hold_is_one_line(cluster):
    with pytest.raises(APIUsageError) as info:
        make(
            cluster, num_envs=4, num_workers=4, vector_kwargs={"placement": "spread", "actor_options": {"num_cpus": 2}}
        )
    message = str(info.value)
    assert "\n" not in message and "can never hold" in message
    assert "3 node(s)" in message and "of 6" in message and "num_cpus" in message


def test_an_address_naming_another_cluster_is_refused_while_connected(cluster):
    with make(cluster) as envs:  # connected to the cluster
        envs.reset(seed=0)
    with pytest.raises(APIUsageError, match="already initialised in this process"):
        vector.make(ray_node_env.NodeCartPole, num_envs=1, backend="ray", vector_kwargs={"address": "127.0.0.1:1"})


def test_a_driver_needs_the_clusters_token(cluster, tmp_path):
    # The cluster runs with Ray's token authentication (RAY_AUTH_MODE=token on every node). A
    # driver on a box of the cluster (here: loopback, as the nodes) without the token (no
    # RAY_AUTH_TOKEN, no token file) gets one line; with the token it connects.
    home = tmp_path / "home"
    home.mkdir()
    box = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    box.update(HOME=str(home), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")  # this box's address: loopback
    token = os.environ.get("RAY_AUTH_TOKEN") or (Path.home() / ".ray" / "auth_token").read_text().strip()
    results = []
    for extra in ({}, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}):
        done = subprocess.run(
            [sys.executable, "-c", ATTEMPT, cluster.address],
            env={**box, **extra},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    refused, joined = results
    assert refused["type"] == "RayConnectionError", refused
    assert "\n" not in refused["error"] and cluster.address in refused["error"] and "token" in refused["error"]
    assert joined["error"] is None, joined
