"""Per env family training defaults (EnvSpec.train_defaults / train_kwargs): applied by `puffer
train` and ``ppo()``, overridden by the user's settings, shown, kept in the checkpoint; and the
generic settings they use (reward_scale, reward_clip, max_seconds)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from optional import require
from plugin_site import run_puffer, write_plugin

from puffer_core.errors import APIUsageError

require("torch")
require("matplotlib")
import torch  # noqa: E402

from puffer_core import train  # noqa: E402
from puffer_core.train.defaults import TrainDefaults, train_defaults  # noqa: E402

TUNED = """
import puffer_core
from puffer_core import EnvSpec
from puffer_core.plugins.builtin.probes import DebugProbeEnv

def _make(number=1):
    return DebugProbeEnv(number)

@puffer_core.hookimpl
def puffer_envs():
    return [
        EnvSpec("tuned/probe", _make, train_defaults={"num_envs": 4, "rollout_steps": 16, "gamma": 0.5},
                train_kwargs={"number": 2}),
        EnvSpec("tuned/stale", _make, train_defaults={"no_such_setting": 1}),
    ]
"""


def test_an_env_id_brings_its_plugins_defaults():
    nethack = train_defaults("nethack/score")
    assert nethack.plugin == "nethack" and nethack.settings["backend"] == "multiprocessing"
    assert "glyphs_crop" in nethack.env_kwargs["observation_keys"]
    config = nethack.config({"num_envs": 8})
    assert config.num_envs == 8 and config.learning_rate == nethack.settings["learning_rate"]
    assert nethack.kwargs({"max_episode_steps": 9}) == {**nethack.env_kwargs, "max_episode_steps": 9}
    assert not train_defaults("classic/cartpole") and not train_defaults(lambda: None)
    assert train_defaults("classic/cartpole").config({}) == train.PPOConfig()


def test_defaults_that_do_not_fit_name_the_plugin():
    stale = TrainDefaults("tuned/stale", "tuned", {"no_such_setting": 1})
    with pytest.raises(APIUsageError, match=r"plugin .tuned.: the train_defaults of tuned/stale .*no_such_setting"):
        stale.config({})
    with pytest.raises(APIUsageError, match="gamma must be a number in"):
        TrainDefaults("tuned/probe", "tuned", {"gamma": 0.5}).config({"gamma": 3})


def test_puffer_train_applies_shows_and_keeps_them_and_set_overrides(tmp_path, site):
    write_plugin(site, "tuned", TUNED)
    runs = {"defaults": (), "overridden": ("--set", "num_envs=2", "--kwarg", "number=1")}
    for name, extra in runs.items():
        args = ("train", "tuned/probe", "--steps", "256", "--out", str(tmp_path / name), "--json", *extra)
        proc = run_puffer(site, *args)
        assert proc.returncode == 0, proc.stderr
        assert "training defaults of the tuned plugin: num_envs=4, rollout_steps=16, gamma=0.5" in proc.stderr
        assert json.loads(proc.stdout)["steps"] >= 256
    defaults, overridden = (train.load(tmp_path / name) for name in runs)
    assert (defaults.config["num_envs"], defaults.config["rollout_steps"], defaults.config["gamma"]) == (4, 16, 0.5)
    assert defaults.env_kwargs == {"number": 2}
    assert (overridden.config["num_envs"], overridden.config["rollout_steps"]) == (2, 16)
    assert overridden.env_kwargs == {"number": 1}
    proc = run_puffer(site, "train", "tuned/stale", "--steps", "64", "--out", str(tmp_path / "stale"))
    assert proc.returncode != 0 and "plugin 'tuned': the train_defaults of tuned/stale" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("settings", "value"), [({"reward_scale": 0.5}, 0.5), ({"reward_clip": 0.25}, 0.25)])
def test_rewards_are_scaled_and_clipped_for_the_learner_only(tmp_path, settings, value):
    # Probe 1: reward 1 on every one-step episode, so V = the reward the learner sees.
    curve = train.ppo("classic/probe_1", 8192, out=tmp_path, num_envs=8, **settings)
    assert {episode[1] for episode in curve.episodes} == {1.0}  # the curve keeps the env's returns
    saved = train.load(tmp_path)
    policy = train.Policy(*_spaces("classic/probe_1"), saved.config["hidden_size"])
    policy.load_state_dict(saved.policy)
    with torch.no_grad():
        assert abs(float(policy.value(torch.zeros(1, 1))[0]) - value) < 0.05


def _spaces(env_id: str) -> tuple:
    import puffer_core

    env = puffer_core.make(env_id)
    return env.obs_layout, env.action_space


def test_max_seconds_ends_a_run_before_its_steps(tmp_path):
    curve = train.ppo("classic/probe_1", 10**9, out=tmp_path, num_envs=8, max_seconds=1.0)
    assert curve.rows and curve.rows[-1]["step"] < 10**9
    assert curve.rows[-1]["seconds"] >= 1.0  # the clock, not the step count, stopped it
    assert curve.rows[-1]["learning_rate"] < curve.rows[0]["learning_rate"]  # annealed over the time
    assert np.isfinite(curve.rows[-1]["value_loss"])
