from __future__ import annotations

import atexit
import multiprocessing
import os
import shutil
import sys
import tempfile

import pytest
from fork_guard import forks_from_threads_fail

from puffer_core import plugins as plugin_module

# Where the default start method is forkserver (the test process has threads: numpy's pool
# at least), each worker imports the env creator's module itself: a test module, so pytest,
# and the test envs. The fork server imports those once before it forks anything instead
# (with the backend's worker module, which the backend adds itself only when it is the one to
# start the server, and no_leaks starts it first): as fast as fork again. Collection imports
# this before any test starts the fork server; preloading only saves time.
multiprocessing.set_forkserver_preload(["__main__", "pytest", "puffer_core.testing", "puffer_core.vector.mp.worker"])

# The runs the tests train keep their records (puffer_core.train.runs) in a folder of the
# session's, not in the user's own registry: set before any test or the processes it starts.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="puffer-test-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], ignore_errors=True)


@pytest.fixture(autouse=True)
def no_fork_from_threads():
    """Any test whose code forks this process while it runs other threads fails (see fork_guard)."""
    with forks_from_threads_fail():
        yield


@pytest.fixture
def site(tmp_path, monkeypatch):
    """An empty folder of installed distributions, importable in this process."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("puffer_plugin_"):
            del sys.modules[name]


def pytest_collection_modifyitems(items):
    """Tests marked ``ray`` run last, in their collected order: one Ray instance then serves
    them all (starting one takes ~10 s) and no other test runs beside its processes. Those
    marked ``ray_absent`` come first among them, before any Ray starts (a Ray test's own
    backend keeps its instance for the rest of the session). Those marked ``ray_cluster`` too
    come last: their cluster replaces that instance (Ray is one per process)."""

    def order(item):
        ray = item.get_closest_marker("ray") is not None
        absent = item.get_closest_marker("ray_absent") is not None
        return (ray, not absent, item.get_closest_marker("ray_cluster") is not None)

    items.sort(key=order)  # stable


@pytest.fixture(scope="session")
def ray_instance():
    """A local Ray instance (2 CPUs), started as the Ray backend starts its own (loopback only,
    token authentication on), shut down at the end of the session if this fixture started it."""
    import ray

    from puffer_core.vector.ray.start import start_local_ray

    started = not ray.is_initialized()
    if started:
        start_local_ray(ray, num_cpus=2)
    yield ray
    if started:
        ray.shutdown()


#: The ``ray_cluster`` fixture's nodes: two CPUs each, on loopback (add one as ``cluster.add_node(**LOOPBACK_NODE)``).
LOOPBACK_NODE = {"num_cpus": 2, "node_ip_address": "127.0.0.1"}


@pytest.fixture(scope="module")
def ray_cluster():
    """A simulated three-node Ray cluster on this machine (``puffer_core.testing.simulated_ray_cluster``:
    two CPUs per node, every service on loopback, Ray's token authentication on), for the tests
    of a module marked ``ray_cluster``; the process's own Ray instance, if any, is shut down
    first (Ray is one per process). Nothing connects to it yet: the tests pass
    ``address=cluster.address``. Shut down at the end of the module."""
    import ray

    from puffer_core.testing import simulated_ray_cluster

    if ray.is_initialized():
        ray.shutdown()
    with simulated_ray_cluster(3, cpus_per_node=LOOPBACK_NODE["num_cpus"]) as cluster:
        try:
            yield cluster
        finally:
            ray.shutdown()


@pytest.fixture
def local_ray(request, ray_instance):
    """Ray for a test marked ``ray``; the test module's own creators travel to the actors by
    value (Ray workers cannot import test modules)."""
    assert request.node.get_closest_marker("ray") is not None, "mark tests that use Ray with @pytest.mark.ray"
    ray_instance.cloudpickle.register_pickle_by_value(request.module)
    return ray_instance


@pytest.fixture(autouse=True)
def fresh_plugin_cache():
    """Each test sees plugins loaded anew (env variables may differ between tests)."""
    plugin_module.reset_plugins()
    yield
    plugin_module.reset_plugins()


def _gym026_available() -> bool:
    try:
        import gym
    except ImportError:
        return False
    return tuple(int(p) for p in gym.__version__.split(".")[:2]) >= (0, 26)


# The gym 0.26 tests run in their own session (`nox -s tests_gym026`: gym 0.26 needs numpy<2);
# elsewhere they are not collected at all rather than reported as skipped.
collect_ignore = [] if _gym026_available() else ["test_adapters_gym026.py"]
