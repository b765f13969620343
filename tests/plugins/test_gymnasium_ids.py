"""Gymnasium ids wherever an env id is taken: a plugin's alias wins, any other registered id is gymnasium's own."""

from __future__ import annotations

import inspect
import json
import pickle

import gymnasium
import numpy as np
import pytest
from plugin_site import run_puffer, write_plugin

import puffer_core
from puffer_core import EnvSpec, vector
from puffer_core.errors import APIUsageError, PluginError, UnknownEnvError
from puffer_core.plugins import get_plugins, gymnasium_ids, load_plugins
from puffer_core.plugins.gymnasium_ids import GymnasiumId, gymnasium_spec, registered_ids, unregistered_aliases
from puffer_core.specs.declarations import env_id_problem, gymnasium_id_problem


class Walk(gymnasium.Env):
    """A user's own env: ``length`` steps of reward 1, registered by the test that uses it."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, length: int = 5):
        self.length = length
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.full(3, self.t / 10, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(3, self.t / 10, np.float32), 1.0, self.t >= self.length, False, {}


@pytest.fixture
def walk_id():
    """``PufferWalk-v0`` registered for one test only (another test's process never sees it)."""
    env_id = "PufferWalk-v0"
    gymnasium.register(env_id, entry_point=Walk)
    yield env_id
    gymnasium.envs.registry.pop(env_id, None)


def test_a_plugin_alias_is_the_plugin_env_said_once(capsys, monkeypatch):
    monkeypatch.setattr(gymnasium_ids, "_NOTED", set())  # as in a fresh process
    plugins = load_plugins(entry_points=[], environ={})
    first = plugins.get_spec("CartPole-v1")
    again = plugins.get_spec("CartPole-v1")
    assert first is again is plugins.env_specs["classic/cartpole"]
    said = capsys.readouterr().err
    assert said.count("puffer: CartPole-v1 is classic/cartpole (classic's env, with its wrappers and defaults)") == 1
    env = puffer_core.make("Acrobot-v1")  # classic/acrobot: its spec, its emulation
    assert env.single_observation_space.shape == (6,)
    env.close()


def test_any_registered_id_is_gymnasiums_own_env():
    spec = get_plugins().get_spec("FrozenLake-v1")  # no plugin declares or aliases it
    assert spec.id == "FrozenLake-v1" and spec.api == "gymnasium" and spec.plugin == "gymnasium"
    assert "gymnasium.envs.toy_text.frozen_lake:FrozenLakeEnv" in spec.description
    env = puffer_core.make("FrozenLake-v1", is_slippery=False, map_name="4x4")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (1,)  # Discrete(16) through the emulation: one flat row
    env.close()


def test_kwargs_are_checked_against_the_entry_points_signature():
    signature = inspect.signature(GymnasiumId("FrozenLake-v1"))
    assert {"is_slippery", "map_name", "desc", "max_episode_steps", "render_mode"} <= set(signature.parameters)
    with pytest.raises(APIUsageError, match=r"FrozenLake-v1 does not take kwarg slippery.*it takes: .*is_slippery"):
        puffer_core.make("FrozenLake-v1", slippery=False)


def test_a_users_own_registration_reaches_the_workers(walk_id):
    env = puffer_core.make(walk_id, length=2)
    env.reset(seed=0)
    env.close()
    with pytest.raises(APIUsageError, match="PufferWalk-v0 does not take kwarg bogus"):
        puffer_core.make(walk_id, bogus=1)
    # A worker process never ran the test's gymnasium.register: the id's registration travels with it.
    with vector.make(walk_id, num_envs=4, num_workers=2, backend="multiprocessing", length=3) as envs:
        envs.reset(seed=0)
        for _ in range(3):
            _, rewards, terminals, _, _ = envs.step(np.zeros(4, dtype=np.int64))
        assert rewards.tolist() == [1.0] * 4 and terminals.all()


def test_the_creator_pickles_with_its_registration(walk_id):
    creator = GymnasiumId(walk_id)
    carried = pickle.dumps(creator)
    gymnasium.envs.registry.pop(walk_id)  # as in a process that never registered it
    env = pickle.loads(carried)(length=1)
    assert env.unwrapped.length == 1
    env.close()


def test_an_id_registered_later_is_found_then():
    env_id = "PufferLate-v0"
    assert gymnasium_spec(env_id) is None
    gymnasium.register(env_id, entry_point=Walk)
    try:
        assert get_plugins().get_spec(env_id).id == env_id
    finally:
        gymnasium.envs.registry.pop(env_id, None)


def test_an_unknown_gymnasium_id_names_the_plugin_env_written_another_way():
    plugins = load_plugins(entry_points=[], environ={})
    with pytest.raises(UnknownEnvError) as excinfo:
        plugins.get_spec("cartpole-v1")
    assert "Did you mean: classic/cartpole" in str(excinfo.value)
    assert "--gymnasium" in str(excinfo.value)
    with pytest.raises(UnknownEnvError, match="unknown environment 'ALE/Nothing-v99'") as excinfo:
        plugins.get_spec("ALE/Nothing-v99")
    assert "No plugin named 'ALE'" not in str(excinfo.value)  # ALE/ is gymnasium's namespace, not a plugin


@pytest.mark.parametrize("env_id", ["CartPole-v1", "ALE/Pong-v5", "NetHackScore-v0", "MyEnv", "my-ns/Env_2.b-v12"])
def test_gymnasium_ids_are_env_ids(env_id):
    assert gymnasium_id_problem(env_id) is None
    assert env_id_problem(env_id) is None


@pytest.mark.parametrize("env_id", ["", "Cart Pole-v1", "a/b/c", "CartPole-v1\n", "x" * 129, "ünï-v0", "os:Env-v0"])
def test_what_is_not_an_env_id_is_refused(env_id):
    """``os:Env-v0``: gymnasium.make would import ``os`` first; an id read from a checkpoint must not choose that."""
    assert env_id_problem(env_id) is not None


@pytest.mark.parametrize("alias", ["classic/cartpole", "Cart Pole", ""])
def test_an_alias_must_be_a_gymnasium_id(alias):
    spec = EnvSpec("mine/env", lambda: None, aliases=(alias,))
    with pytest.raises(PluginError, match="aliases"):
        spec.validate("mine")


def test_check_holds_aliases_to_registered_ids():
    spec = EnvSpec("mine/env", lambda: None, aliases=("CartPole-v1", "NoSuchEnvAnywhere-v0"))
    assert unregistered_aliases(spec) == ["NoSuchEnvAnywhere-v0"]
    assert unregistered_aliases(get_plugins().env_specs["classic/cartpole"]) == []


def test_registered_ids_name_their_entry_points():
    ids = registered_ids()
    assert ids["CartPole-v1"] == "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
    assert list(ids) == sorted(ids)


ALIASED = """
import puffer_core
from puffer_core import EnvSpec

def _make():
    import gymnasium
    return gymnasium.make("CartPole-v1")

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("aliased/real", _make, aliases=("MountainCar-v0",)),
            EnvSpec("aliased/made_up", _make, aliases=("NoSuchEnvAnywhere-v0",))]
"""


def test_puffer_check_holds_each_alias_to_a_registered_id(site):
    write_plugin(site, "aliased", ALIASED)
    proc = run_puffer(site, "check", "aliased", "--steps", "8", "--json")
    assert proc.returncode == 1, proc.stderr
    results = {(r["target"], r["check"]): r for r in json.loads(proc.stdout)["results"]}
    assert results[("aliased/real", "aliases registered")]["passed"]
    made_up = results[("aliased/made_up", "aliases registered")]
    assert not made_up["passed"] and "NoSuchEnvAnywhere-v0: not registered with gymnasium" in made_up["detail"]
    # An alias is checked as an env id too, and a gymnasium id without a plugin is one.
    for env_id in ("MountainCar-v0", "FrozenLake-v1"):
        proc = run_puffer(site, "check", env_id, "--steps", "8")
        assert proc.returncode == 0 and " passed, 0 failed" in proc.stdout, proc.stdout
