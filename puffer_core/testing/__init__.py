"""Everything a plugin author's tests import, in one place.

With ``puffer_core`` itself, this package is the plugin author's API: plugins and their
tests import from here, never from the core's inner modules (a test parses every plugin's
imports to keep it so). It holds the conformance checks (``check_env``, ``check_plugin``,
the peers' own checkers), runs in a fresh interpreter as if packages were missing
(``run_puffer``, ``envs_json``), small deterministic test envs and a vector rollout, and
helpers for plugin tests and benchmarks (a simulated multi-node Ray cluster among them).
"""

from __future__ import annotations

from puffer_core.env.random_actions import random_actions
from puffer_core.env.recording import plan_recording
from puffer_core.plugins import get_plugins, load_plugins, reset_plugins
from puffer_core.testing.assertions import assert_trees_equal, played_frames
from puffer_core.testing.conformance import (
    GYMNASIUM_CHECK,
    PETTINGZOO_CHECK,
    CheckReport,
    CheckResult,
    check_env,
    check_plugin,
    peer_checker_name,
    run_peer_checker,
)
from puffer_core.testing.envs import CountingEnv, FaultEnv, TinyParallelEnv, rollout
from puffer_core.testing.isolation import BLOCK_IMPORT, envs_json, run_puffer, run_python
from puffer_core.testing.ray_cluster import simulated_ray_cluster
from puffer_core.vector.timing import interleaved

__all__ = [
    "BLOCK_IMPORT",
    "GYMNASIUM_CHECK",
    "PETTINGZOO_CHECK",
    "CheckReport",
    "CheckResult",
    "CountingEnv",
    "FaultEnv",
    "TinyParallelEnv",
    "assert_trees_equal",
    "check_env",
    "check_plugin",
    "envs_json",
    "get_plugins",
    "interleaved",
    "load_plugins",
    "peer_checker_name",
    "plan_recording",
    "played_frames",
    "random_actions",
    "reset_plugins",
    "rollout",
    "run_peer_checker",
    "run_puffer",
    "run_python",
    "simulated_ray_cluster",
]
