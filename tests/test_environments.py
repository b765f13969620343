"""`puffer_core.make`: the path from an id to an emulated env, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
from plugin_site import GOOD, site_entry_points, write_plugin

import puffer_core
from puffer_core.emulation import GymnasiumEmulator, PettingZooEmulator
from puffer_core.env.environments import make_raw, missing_requirements
from puffer_core.errors import MissingDependencyError, UnknownEnvError
from puffer_core.plugins import load_plugins, manager as plugin_module
from puffer_core.specs.declarations import EnvSpec


@pytest.fixture
def use_site(site, monkeypatch):
    """Make `puffer_core.make` see the plugins written into ``site``."""

    def activate():
        loaded = load_plugins(entry_points=site_entry_points(site), environ={})
        monkeypatch.setattr(plugin_module, "_cached", loaded)
        return loaded

    return activate


def test_make_returns_emulators():
    env = puffer_core.make("classic/cartpole")
    assert isinstance(env, GymnasiumEmulator)
    obs, info = env.reset(seed=0)
    assert obs.shape == (4,) and info == {}
    multi = puffer_core.make("classic/probe_multiagent", num_agents=2)
    assert isinstance(multi, PettingZooEmulator) and multi.num_agents == 2


def test_kwargs_override_spec_defaults():
    env = make_raw("classic/probe_dict", episode_length=3)
    env.reset(seed=0)
    for _ in range(3):
        *_, truncated, _ = env.step(env.action_space.sample())
    assert truncated


def test_episode_info_only_at_the_end():
    env = puffer_core.make("classic/probe_dict", episode_length=5)
    env.reset(seed=1)
    infos = [env.step(env.action_space.sample())[-1] for _ in range(5)]
    assert infos[:4] == [{}, {}, {}, {}]
    assert infos[4]["episode_length"] == 5 and "episode_return" in infos[4]


def test_unknown_id_error_suggests():
    with pytest.raises(UnknownEnvError, match="Did you mean: classic/cartpole"):
        puffer_core.make("classic/cartpool")


def test_missing_package_says_what_to_install(site, use_site):
    write_plugin(site, "good", GOOD)
    use_site()
    with pytest.raises(MissingDependencyError) as excinfo:
        puffer_core.make("good/needy")
    message = str(excinfo.value)
    assert "good/needy needs definitely_missing_pkg_xyz" in message
    assert "pip install definitely-missing-pkg-xyz" in message


def test_requires_with_versions_checks_installed_distributions():
    def spec(*requires):
        return EnvSpec("x/y", lambda: None, requires=requires)

    assert missing_requirements(spec("numpy>=1.0", "gymnasium")) == []
    assert missing_requirements(spec("numpy<1.0")) == ["numpy<1.0"]
    assert missing_requirements(spec("no-such-dist-xyz>=1")) == ["no-such-dist-xyz>=1"]


def test_too_old_version_is_named(site, use_site):
    write_plugin(
        site,
        "old",
        """
        import puffer_core
        from puffer_core import EnvSpec

        @puffer_core.hookimpl
        def puffer_envs():
            return [EnvSpec("old/env", lambda: None, requires=("numpy<1.0",))]
        """,
    )
    use_site()
    import numpy

    with pytest.raises(MissingDependencyError, match=rf"needs numpy<1.0 \(found {numpy.__version__}\)"):
        puffer_core.make("old/env")


def test_step_info_keys_pass_through_on_ordinary_steps(site, use_site):
    write_plugin(
        site,
        "events",
        """
        import gymnasium
        import numpy as np
        import puffer_core
        from puffer_core import EnvSpec

        class Events(gymnasium.Env):
            observation_space = gymnasium.spaces.Box(0, 1, shape=(2,), dtype=np.float32)
            action_space = gymnasium.spaces.Discrete(2)

            def reset(self, *, seed=None, options=None):
                self.t = 0
                return np.zeros(2, np.float32), {}

            def step(self, action):
                self.t += 1
                info = {"noise": np.zeros(100)}
                if self.t == 2:
                    info["life_lost"] = True
                return np.zeros(2, np.float32), 1.0, self.t == 4, False, info

        @puffer_core.hookimpl
        def puffer_envs():
            return [EnvSpec("events/env", Events, step_info_keys=("life_lost",))]
        """,
    )
    use_site()
    env = puffer_core.make("events/env")
    env.reset(seed=0)
    infos = [env.step(0)[-1] for _ in range(4)]
    assert infos[0] == {} and infos[1] == {"life_lost": True} and infos[2] == {}
    assert infos[3]["episode_length"] == 4 and "noise" not in infos[3]
    np.testing.assert_equal(infos[3]["episode_return"], 4.0)
