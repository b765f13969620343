"""NetHack in the field: a worker killed from outside mid-episode (as the OOM killer or a
crashing NLE would) is replaced under on_fault="restart", and the run goes on."""

from __future__ import annotations

import os
import signal

import nle  # noqa: F401  (a dependency: a broken install must fail, not skip)
import numpy as np

from puffer_core import vector


def test_a_sigkilled_nethack_worker_is_replaced_mid_episode():
    with vector.make(
        "nethack/score", num_envs=4, num_workers=2, backend="multiprocessing", seed=3, on_fault="restart"
    ) as envs:
        envs.reset()
        rng = np.random.default_rng(0)
        for _ in range(20):  # well inside the first episodes
            _, _, terminals, truncations, _ = envs.step(rng.integers(0, 23, 4))
        assert not (terminals | truncations)[2:].any(), "worker 1's episodes must still be running"
        victim = envs.pids[1]
        os.kill(victim, signal.SIGKILL)
        obs, rewards, terminals, truncations, infos = envs.step(rng.integers(0, 23, 4))
        assert truncations[2:].all() and not terminals[2:].any() and rewards[2:].tolist() == [0.0, 0.0]
        faults = [info for info in infos if "fault" in info]
        assert [info["env_id"] for info in faults] == [2, 3]
        assert faults[0]["fault"]["cause"] == "killed by signal SIGKILL" and faults[0]["fault"]["worker"] == 1
        assert envs.pids[1] != victim
        glyphs = envs.unflatten_observation(obs)["glyphs"]
        assert glyphs[2:].any()  # fresh games on the replacement's rows
        for _ in range(50):  # and the run goes on, the other worker's games untouched by it
            _, _, _, truncations, infos = envs.step(rng.integers(0, 23, 4))
            assert not [info for info in infos if "fault" in info]
        assert envs.stats["restarts"] == 1 and envs.stats["restart_seconds"][0] > 0  # its latency: puffer bench
