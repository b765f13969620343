"""`puffer_core.train.evaluation` with a recurrent policy: `puffer eval` and `evaluate()` play an
LSTM run with its state carried through each episode and started afresh at the next, and
such a run resumes from its checkpoint."""

from __future__ import annotations

import json

import pytest
from optional import require
from plugin_site import puffer_env, run_puffer_many

require("torch")
require("matplotlib")

from puffer_core import train  # noqa: E402

SETTINGS = {"policy": "lstm", "hidden_size": 16, "num_envs": 32, "seed": 1}


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory):
    """An LSTM trained on the memory probe (right on nearly every episode by its end)."""
    out = tmp_path_factory.mktemp("memory") / "run"
    train.ppo("classic/probe_memory", 20_000, out=out, **SETTINGS)
    return out


def test_evaluate_carries_the_state_through_episodes(memory_run):
    saved = train.load(memory_run)
    assert saved.settings().policy == "lstm" and any(key.startswith("memory.lstm.") for key in saved.policy)
    played = train.evaluate(memory_run, episodes=100)
    assert len(played.returns) == 100 and played.lengths == [6] * 100
    # the cue is in the state by the query: a policy that lost it would be right half the time
    assert sum(r > 0 for r in played.returns) >= 95, played.returns


def test_puffer_eval_plays_it_and_a_two_agent_run_too(memory_run, tmp_path):
    two = tmp_path / "two"
    train.ppo("classic/probe_memory_2agents", 1024, out=two, **SETTINGS)
    cases = [("eval", str(memory_run), "--episodes", "50", "--json"), ("eval", str(two), "--episodes", "8", "--json")]
    memory, agents = run_puffer_many(cases, puffer_env(None), preload=("torch",))
    assert memory.returncode == 0 and agents.returncode == 0, (memory.stderr, agents.stderr)
    played = json.loads(memory.stdout)
    assert played["episodes"] == 50 and played["mean_return"] >= 0.9, played
    assert json.loads(agents.stdout)["episodes"] == 8


def test_an_lstm_run_resumes(memory_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(memory_run, copy)
    before = train.load(copy)
    more = train.ppo(resume=copy, steps=before.step + 2048)
    assert more.rows[-1]["step"] >= before.step + 2048
    after = train.load(copy)
    assert after.settings().policy == "lstm" and after.settings().hidden_size == 16
    assert set(after.policy) == set(before.policy)
    assert sum(r > 0 for r in train.evaluate(copy, episodes=50).returns) >= 45


@pytest.fixture(scope="module")
def undecided_run(tmp_path_factory):
    """A policy on probe 4 (action 1 earns +1, action 0 earns -1, one step an episode) that has
    barely moved from its start: both actions about equally likely, one of them the argmax."""
    out = tmp_path_factory.mktemp("undecided") / "run"
    train.ppo("classic/probe_4", 64, out=out, num_envs=8, rollout_steps=8, learning_rate=1e-9, seed=3)
    return out


def test_puffer_eval_samples_by_default_and_greedy_takes_the_argmax(undecided_run):
    args = ("eval", str(undecided_run), "--episodes", "60", "--json")
    sampled, greedy = run_puffer_many([args, (*args, "--greedy")], puffer_env(None), preload=("torch",))
    assert sampled.returncode == 0 and greedy.returncode == 0, (sampled.stderr, greedy.stderr)
    # the observation never changes, so the argmax is one action every episode; sampling both
    assert set(json.loads(sampled.stdout)["returns"]) == {-1.0, 1.0}, sampled.stdout
    assert len(set(json.loads(greedy.stdout)["returns"])) == 1, greedy.stdout


def test_evaluate_samples_by_default_like_puffer_eval(undecided_run):
    assert set(train.evaluate(undecided_run, episodes=60).returns) == {-1.0, 1.0}
    assert len(set(train.evaluate(undecided_run, episodes=60, greedy=True).returns)) == 1
