"""Training across boxes: `puffer train ... --backend ray --ray-address ADDR` steps the envs on a
Ray cluster (a simulated three-node one here) and learns in the process that runs the command,
which writes the run; the run then plays and resumes off the cluster."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from optional import require
from plugin_site import puffer_env, run_puffer

from puffer_core.plugins.builtin.probes import probe_expectations

require("torch")
require("matplotlib")
import torch  # noqa: E402

from puffer_core import train  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.ray_cluster]

GAMMA = 0.5  # as the probe tests of test_train.py
STEPS = 16_384
# The evaluation a laptop would run: it must not import Ray, so it cannot reach the cluster.
EVAL_OFF_THE_CLUSTER = """
import json, sys
from puffer_core import train
result = train.evaluate(sys.argv[1], 3)
print(json.dumps({"episodes": len(result.returns), "ray_imported": "ray" in sys.modules}))
"""


@pytest.fixture(scope="module")
def trained(ray_cluster, tmp_path_factory):
    """probe_5 trained by `puffer train` with its envs spread over the cluster's three nodes."""
    out = tmp_path_factory.mktemp("cluster") / "probe5"
    args = ["train", "classic/probe_5", "--backend", "ray", "--ray-address", ray_cluster.address]
    args += ["--placement", "spread", "--num-workers", "3", "--steps", str(STEPS), "--seed", "1"]
    args += ["--set", f"gamma={GAMMA}", "--out", str(out), "--json"]
    proc = run_puffer(None, *args, extra_env={"RAY_AUTH_MODE": "token"}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


def test_probe_5_learns_with_its_envs_on_the_cluster(trained):
    out, summary = trained
    assert summary["steps"] >= STEPS and summary["out"] == str(out)
    saved = train.load(out)
    assert saved.config["backend"] == "ray" and saved.config["placement"] == "spread"
    import puffer_core

    env = puffer_core.make(saved.env)
    policy = train.Policy(env.obs_layout, env.action_space, saved.config["hidden_size"])
    policy.load_state_dict(saved.policy)
    expected = probe_expectations("classic/probe_5", GAMMA)
    with torch.no_grad():
        distribution, values = policy(torch.from_numpy(expected.flat_observations(env)))
    np.testing.assert_allclose(values.numpy(), expected.values, atol=0.1)
    np.testing.assert_array_equal(distribution.mode().numpy(), expected.best_actions)


def test_the_run_is_written_where_the_command_ran(trained):
    out, _ = trained
    assert sorted(path.name for path in out.iterdir()) == [
        "config.toml",
        "curve.csv",
        "curve.png",
        "policy.pt",
        "tensorboard",
    ]


def test_the_run_plays_without_reaching_the_cluster(trained):
    out, _ = trained
    done = subprocess.run(
        [sys.executable, "-c", EVAL_OFF_THE_CLUSTER, str(out)],
        capture_output=True,
        text=True,
        env=puffer_env(None, {"RAY_ADDRESS": "127.0.0.1:1"}),  # a cluster nobody could reach
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"episodes": 3, "ray_imported": False}


def test_a_resumed_run_does_not_inherit_where_it_ran(trained, tmp_path):
    out, summary = trained
    more = tmp_path / "resumed"
    curve = train.ppo(resume=out, out=more, steps=summary["steps"] + 2048, backend="serial")
    assert curve.rows[-1]["step"] >= summary["steps"] + 2048
    resumed = train.load(more).config
    assert (resumed["backend"], resumed["ray_address"], resumed["placement"]) == ("serial", None, None)


def test_a_resumed_run_takes_a_new_address_and_no_other_placement(trained, ray_cluster, tmp_path):
    out, summary = trained
    more = tmp_path / "again"
    args = ["train", "--resume", str(out), "--out", str(more), "--ray-address", ray_cluster.address]
    args += ["--steps", str(summary["steps"] + 2048), "--json"]
    proc = run_puffer(None, *args, extra_env={"RAY_AUTH_MODE": "token"}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    resumed = train.load(more).config
    assert (resumed["backend"], resumed["ray_address"], resumed["placement"]) == ("ray", ray_cluster.address, None)
