"""The random rollout behind `puffer run` (puffer_core.vector.random_run)."""

from __future__ import annotations

import warnings

import pytest

from puffer_core.errors import APIUsageError
from puffer_core.vector.random_run import run_random


def test_puffer_run_draws_random_actions_among_the_allowed_ones():
    # An illegal move ends a PettingZoo board game at once (with a warning): random play that
    # ignored the action mask would finish every game on its first or second move.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_random("pettingzoo/tictactoe", steps=2000, num_envs=2, seed=0)
    assert not [w for w in caught if "Illegal move" in str(w.message)]
    assert result.episodes >= 100
    # A game of tic-tac-toe takes 5 to 9 moves, and every agent has a row at each of them.
    assert 5 <= result.episode_means["episode_length"] <= 9


def test_run_random_counts_steps_episodes_and_their_statistics():
    progressed = []
    result = run_random("classic/probe_1", steps=50, num_envs=2, seed=0, on_progress=progressed.append)
    # Probe 1's episodes last one step; under next-step autoreset every other row an env
    # returns is the reset after its episode ended, so about half the rows end an episode.
    assert result.steps == sum(progressed) >= 50
    assert result.steps // 2 - 2 <= result.episodes <= result.steps // 2
    assert result.episode_means == pytest.approx({"episode_return": 1.0, "episode_length": 1.0})
    row = result.to_json()
    assert row["env"] == "classic/probe_1" and row["num_envs"] == 2 and row["steps_per_second"] > 0


def test_run_random_stops_after_an_episode_count_and_keeps_each_return():
    # Probe 3 pays 1 on its second step: every episode's return is 1 and lasts 2 steps.
    result = run_random("classic/probe_3", steps=None, episodes=7, num_envs=2, seed=0)
    assert 7 <= result.episodes <= 8  # both envs can end an episode on the last step
    assert result.episode_returns == [1.0] * 7  # the first 7 to end
    assert result.steps < 40  # it stopped on the episodes, not after some step budget


def test_a_long_runs_returns_stay_bounded(monkeypatch):
    from puffer_core.vector import random_run

    monkeypatch.setattr(random_run, "RETURNS_KEPT", 3)
    result = run_random("classic/probe_1", steps=50, num_envs=2, seed=0)
    assert result.episodes >= 20 and result.episode_returns == [1.0] * 3
    assert result.episode_means == pytest.approx({"episode_return": 1.0, "episode_length": 1.0})


def test_run_random_needs_a_limit():
    with pytest.raises(APIUsageError, match="steps or episodes"):
        run_random("classic/probe_1", steps=None)


def test_puffer_run_looks_its_env_up_once_however_many_envs_it_builds(monkeypatch):
    """`puffer run ENV` resolves the id once per process: each env built after the first skips
    the lookup, and a factory sent to a worker leaves the looked-up spec behind."""
    import pickle

    from click.testing import CliRunner

    from puffer_core.cli.main import cli
    from puffer_core.env.factory import EnvFactory
    from puffer_core.plugins.manager import PluginSet

    looked_up = []
    get_spec = PluginSet.get_spec
    monkeypatch.setattr(PluginSet, "get_spec", lambda self, env_id: looked_up.append(env_id) or get_spec(self, env_id))
    result = CliRunner().invoke(cli, ["run", "classic/cartpole", "--steps", "20", "--num-envs", "4"])
    assert result.exit_code == 0, result.output
    assert looked_up == ["classic/cartpole"]
    factory = EnvFactory("classic/cartpole")
    factory().close()
    assert pickle.loads(pickle.dumps(factory))._looked_up is None
