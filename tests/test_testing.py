"""`puffer check` / puffer_core.testing: passes good envs, names what is wrong with bad ones."""

from __future__ import annotations

import json

import pytest
from plugin_site import run_puffer, site_entry_points, write_plugin

from puffer_core.errors import UnknownEnvError
from puffer_core.plugins import load_plugins
from puffer_core.testing import assert_trees_equal, check_env, check_plugin

FLAWED = '''
import gymnasium
import numpy as np
import puffer_core
from gymnasium import spaces
from puffer_core import EnvSpec


class OutOfSpace(gymnasium.Env):
    observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.full(2, 5.0, dtype=np.float32), {}  # outside [0, 1]

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}


class Unseeded(gymnasium.Env):
    observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.random.default_rng().random(2, dtype=np.float32), {}  # ignores the seed

    def step(self, action):
        return np.random.default_rng().random(2, dtype=np.float32), 0.0, False, False, {}


@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("flawed/out_of_space", OutOfSpace), EnvSpec("flawed/unseeded", Unseeded)]
'''


def test_probe_envs_pass_every_check():
    for env_id in ("classic/probe_dict", "classic/probe_mixed", "classic/probe_multiagent"):
        report = check_env(env_id, steps=24)
        assert report.passed, report.summary()
        names = [r.name for r in report.results]
        assert names == [
            "spec",
            "reset/step contract and spaces",
            "determinism by seed",
            "emulation round trip",
            "multiprocessing run",
        ]


def test_flawed_envs_fail_the_right_check(site):
    write_plugin(site, "flawed", FLAWED)
    plugins = load_plugins(entry_points=site_entry_points(site), environ={})
    out = {r.name: r for r in check_env("flawed/out_of_space", steps=4, plugins=plugins).results}
    assert not out["reset/step contract and spaces"].passed
    assert "outside observation_space" in out["reset/step contract and spaces"].detail
    unseeded = {r.name: r for r in check_env("flawed/unseeded", steps=4, plugins=plugins).results}
    assert unseeded["reset/step contract and spaces"].passed
    assert not unseeded["determinism by seed"].passed and "step 0 obs" in unseeded["determinism by seed"].detail
    report = check_plugin("flawed", steps=4, plugins=plugins)
    assert not report.passed
    assert report.results[0].passed  # the plugin itself loads fine


def test_check_unknown_target():
    with pytest.raises(UnknownEnvError, match="no plugin or env named 'nope'"):
        check_plugin("nope")


def test_check_cli_exit_codes_and_json(site):
    write_plugin(site, "flawed", FLAWED)
    bad = run_puffer(site, "check", "flawed", "--steps", "4")
    assert bad.returncode == 1
    assert "✗ flawed/out_of_space: reset/step contract and spaces" in bad.stdout
    assert "failed" in bad.stdout.splitlines()[-1]
    good = run_puffer(site, "check", "classic/probe_dict", "--steps", "8", "--json")
    assert good.returncode == 0, good.stdout + good.stderr
    data = json.loads(good.stdout)
    assert data["passed"] is True and len(data["results"]) == 5


def test_assert_trees_equal_names_the_path():
    assert_trees_equal({"a": (1, [2, 3])}, {"a": (1, [2, 3])})
    with pytest.raises(AssertionError, match=r"obs\['a'\]\[1\]"):
        assert_trees_equal({"a": (1, [2, 3])}, {"a": (1, [2, 4])})


def test_env_whose_package_is_missing_is_reported_not_failed(site):
    from plugin_site import GOOD

    write_plugin(site, "good", GOOD)
    plugins = load_plugins(entry_points=site_entry_points(site), environ={})
    report = check_env("good/needy", plugins=plugins)
    assert [r.name for r in report.results] == ["spec", "env checks"]
    assert report.results[1].skipped and "pip install definitely-missing-pkg-xyz" in report.results[1].detail
    assert report.passed  # the spec check ran and passed; nothing failed
    cli = run_puffer(site, "check", "good/needy")
    assert cli.returncode == 0 and "1 skipped (missing packages)" in cli.stdout
