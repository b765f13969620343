"""`puffer check` / puffer_core.testing: passes good envs, names what is wrong with bad ones."""

from __future__ import annotations

import json
import re

import pytest
from plugin_site import run_puffer, site_entry_points, write_plugin

from puffer_core.errors import UnknownEnvError
from puffer_core.plugins import load_plugins
from puffer_core.testing import (
    GYMNASIUM_CHECK,
    PETTINGZOO_CHECK,
    assert_trees_equal,
    check_env,
    check_plugin,
    run_python,
)

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


class SeedlessRng(gymnasium.Env):
    """Passes Puffer's own checks (its observations do not depend on the RNG), not Gymnasium's."""

    observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0  # no super().reset(seed=seed): the RNG drawing the rewards ignores the seed
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.full(2, self.t / 100, dtype=np.float32)
        return obs, float(self.np_random.random()), self.t >= 50, False, {}


class FreshSpaces:
    """A Parallel env that passes Puffer's own checks, not PettingZoo's: a new space object per call."""

    metadata = {"render_modes": [], "name": "fresh_spaces"}
    render_mode = None
    possible_agents = ["a", "b"]

    def __init__(self):
        self.agents, self.t = [], 0

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(2, dtype=np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        done = self.t >= 20
        obs = {a: np.full(2, self.t / 100, dtype=np.float32) for a in self.agents}
        result = obs, dict.fromkeys(obs, 0.0), dict.fromkeys(obs, done), dict.fromkeys(obs, False), {a: {} for a in obs}
        if done:
            self.agents = []
        return result

    def close(self):
        pass


@puffer_core.hookimpl
def puffer_envs():
    return [
        EnvSpec("flawed/out_of_space", OutOfSpace),
        EnvSpec("flawed/unseeded", Unseeded),
        EnvSpec("flawed/seedless_rng", SeedlessRng),
        EnvSpec("flawed/fresh_spaces", FreshSpaces, api="pettingzoo"),
    ]
'''

PUFFER_CHECKS = ["spec", "reset/step contract and spaces", "determinism by seed", "emulation round trip"]


def test_probe_envs_pass_every_check_including_their_peer_checker():
    peers = {
        "classic/probe_dict": GYMNASIUM_CHECK,
        "classic/probe_mixed": GYMNASIUM_CHECK,
        "classic/probe_multiagent": PETTINGZOO_CHECK,
    }
    for env_id, peer in peers.items():
        report = check_env(env_id, steps=24)
        assert report.passed, report.summary()
        names = [r.name for r in report.results]
        assert names == [*PUFFER_CHECKS, peer, "multiprocessing run"]


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


def test_peer_checkers_catch_what_puffer_checks_do_not(site):
    write_plugin(site, "flawed", FLAWED)
    plugins = load_plugins(entry_points=site_entry_points(site), environ={})
    for env_id, peer, message in (
        ("flawed/seedless_rng", GYMNASIUM_CHECK, "does not call `super().reset(seed=seed)`"),
        ("flawed/fresh_spaces", PETTINGZOO_CHECK, "should return the exact same space object"),
    ):
        results = {r.name: r for r in check_env(env_id, steps=8, plugins=plugins).results}
        assert all(results[name].passed for name in [*PUFFER_CHECKS, "multiprocessing run"]), env_id
        assert not results[peer].passed and message in results[peer].detail, results[peer].detail


def test_peer_checker_warnings_are_shown_not_failed():
    report = check_env("classic/cartpole", steps=8)
    result = next(r for r in report.results if r.name == GYMNASIUM_CHECK)
    assert report.passed and result.passed
    # CartPole's unbounded observation Box draws these; the emulator's own wrapper warnings are left out.
    assert result.detail == (
        "2 warnings: A Box observation space minimum value is -infinity. This is probably too low.; "
        "A Box observation space maximum value is infinity. This is probably too high."
    )


NO_INFOS = """
from gymnasium import spaces
from puffer_core.emulation import PettingZooEmulator
from puffer_core.testing import run_peer_checker


class NoInfos:
    possible_agents = ["a"]
    agents = []
    unwrapped = property(lambda self: self)
    _space = spaces.Discrete(2)

    def observation_space(self, agent):
        return self._space

    def action_space(self, agent):
        return self._space

    def reset(self, seed=None, options=None):
        self.agents = ["a"]
        return {"a": 0}, None  # the infos must be a dict; parallel_api_test asserts it without a message


try:
    run_peer_checker(PettingZooEmulator(NoInfos()))
except AssertionError as exc:
    print(exc)
"""


def test_a_checker_assert_without_message_is_reported_by_its_source_line():
    # In a fresh interpreter: pytest rewrites the asserts of modules named *_test.py (as the
    # checker's is), which gives them a message they do not have where `puffer check` runs.
    result = run_python(NO_INFOS)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"`assert isinstance\(infos, dict\)` \(parallel_test\.py:\d+\)\n", result.stdout), result.stdout


def test_check_unknown_target():
    with pytest.raises(UnknownEnvError, match="no plugin or env named 'nope'"):
        check_plugin("nope")


def test_check_cli_exit_codes_and_json(site):
    write_plugin(site, "flawed", FLAWED)
    bad = run_puffer(site, "check", "flawed", "--steps", "4")
    assert bad.returncode == 1
    assert "✗ flawed/out_of_space: reset/step contract and spaces" in bad.stdout
    assert "✗ flawed/seedless_rng: gymnasium check_env" in bad.stdout
    assert "failed" in bad.stdout.splitlines()[-1]
    # parallel_api_test prints on success: the JSON on stdout must stay parseable.
    good = run_puffer(site, "check", "classic/probe_multiagent", "--steps", "8", "--json")
    assert good.returncode == 0, good.stdout + good.stderr
    data = json.loads(good.stdout)
    assert data["passed"] is True
    assert [r["check"] for r in data["results"]] == [*PUFFER_CHECKS, PETTINGZOO_CHECK, "multiprocessing run"]


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


FLAWED_BATCHES = '''
import functools

import gymnasium
import numpy as np
import puffer_core
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from puffer_core import EnvSpec

cartpole = functools.partial(gymnasium.make, "CartPole-v1")


def same_step(num_envs):
    return SyncVectorEnv([cartpole] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)


class PaysOnReset(SyncVectorEnv):
    """Next-step autoreset by its metadata, but the reset step pays 1 and says so nowhere."""

    def step(self, actions):
        obs, rewards, terminals, truncations, info = super().step(actions)
        return obs, np.ones_like(rewards), terminals, truncations, info


def pays_on_reset(num_envs):
    return PaysOnReset([cartpole] * num_envs)


def unseeded(num_envs):
    batch = SyncVectorEnv([cartpole] * num_envs)
    reset = batch.reset
    batch.reset = lambda seed=None, options=None: reset(seed=None, options=options)  # drops the seed
    return batch


@puffer_core.hookimpl
def puffer_envs():
    return [
        EnvSpec("batches/same_step", cartpole, batch_creator=same_step),
        EnvSpec("batches/pays_on_reset", cartpole, batch_creator=pays_on_reset),
        EnvSpec("batches/unseeded", cartpole, batch_creator=unseeded),
        EnvSpec("batches/good", cartpole, batch_creator=lambda num_envs: SyncVectorEnv([cartpole] * num_envs)),
    ]
'''

NATIVE_CHECKS = ["native batch contract", "native batch determinism by seed", "native batches on 2 workers"]


def test_a_native_batch_is_held_to_its_contract(site):
    write_plugin(site, "batches", FLAWED_BATCHES)
    plugins = load_plugins(entry_points=site_entry_points(site), environ={})

    def results(env_id: str) -> dict:
        return {r.name: r for r in check_env(env_id, steps=300, plugins=plugins).results}

    good = results("batches/good")
    assert all(good[name].passed for name in NATIVE_CHECKS), [good[name].detail for name in NATIVE_CHECKS]
    same_step = results("batches/same_step")["native batch contract"]
    assert not same_step.passed and "autoreset mode" in same_step.detail and "next-step" in same_step.detail
    pays = results("batches/pays_on_reset")["native batch contract"]
    assert not pays.passed and "a reset step paid a reward" in pays.detail
    unseeded = results("batches/unseeded")
    assert unseeded["native batch contract"].passed and not unseeded["native batch determinism by seed"].passed
    # The per-env checks of the same creator pass: the batch is what failed.
    assert results("batches/pays_on_reset")["reset/step contract and spaces"].passed
