"""`--kwarg KEY=VALUE` of every command that builds an env: VALUE parsed by the type the env declares."""

from __future__ import annotations

import json

import pytest
from plugin_site import run_puffer

import puffer_core
from puffer_core.cli.options import parse_env_kwargs_option


def test_preprocess_false_reaches_breakout_as_false_and_changes_its_observations():
    pytest.importorskip("ale_py")
    given = parse_env_kwargs_option("atari/breakout", ("preprocess=False",))
    assert given == {"preprocess": False}
    shapes = []
    for kwargs in ({}, given):
        env = puffer_core.make("atari/breakout", **kwargs)
        shapes.append(env.observation_space.shape)
        env.close()
    assert shapes == [(4 * 84 * 84,), (210 * 160 * 3,)]


@pytest.mark.parametrize(
    ("command", "kwarg", "message"),
    [
        (("run", "classic/cartpole", "--steps", "1"), "max_episode_steps=abc", "max_episode_steps=abc: not a number"),
        (("run", "classic/cartpole", "--steps", "1"), "sutton_barto_reward=maybe", "not true or false"),
        (("run", "classic/cartpole", "--steps", "1"), "max_episod_steps=5", "did you mean max_episode_steps?"),
        (("autotune", "classic/cartpole"), "max_episode_steps=abc", "max_episode_steps=abc: not a number"),
        (("train", "classic/cartpole", "--steps", "1"), "max_episode_steps=abc", "not a number"),
        (
            ("sweep", "classic/cartpole", "--trials", "1", "--steps", "1", "--param", "gamma=0.9:0.99"),
            "max_episode_steps=abc",
            "not a number",
        ),
    ],
)
def test_a_wrong_kwarg_is_one_usage_line_in_every_command(tmp_path, command, kwarg, message):
    proc = run_puffer(None, *command, "--kwarg", kwarg, extra_env={"HOME": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "classic/cartpole's" in proc.stderr or "did you mean" in proc.stderr


def test_frameskip_abc_says_not_a_number():
    pytest.importorskip("ale_py")
    proc = run_puffer(None, "run", "atari/breakout", "--steps", "1", "--kwarg", "frameskip=abc")
    assert proc.returncode == 2
    assert "--kwarg frameskip=abc: not a number; atari/breakout's frameskip takes int | list[int]" in proc.stderr


def test_a_list_still_parses_as_json_where_the_type_is_a_list():
    pytest.importorskip("ale_py")
    given = parse_env_kwargs_option("atari/breakout", ("preprocess=false", "frameskip=[2, 5]"))
    assert given == {"preprocess": False, "frameskip": (2, 5)}  # a tuple: the creator annotates one
    proc = run_puffer(
        None,
        "run",
        "atari/breakout",
        "--steps",
        "4",
        "--json",
        "--kwarg",
        "preprocess=false",
        "--kwarg",
        "frameskip=[2, 5]",
    )
    assert proc.returncode == 0, proc.stderr


def test_eval_and_resume_parse_by_the_checkpoints_env(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    trained = run_puffer(None, "train", "classic/cartpole", "--steps", "256", "--out", str(out), "--json")
    assert trained.returncode == 0, trained.stderr
    bad = run_puffer(None, "eval", str(out), "--episodes", "1", "--kwarg", "max_episode_steps=abc")
    assert bad.returncode == 2 and "max_episode_steps=abc: not a number; classic/cartpole's" in bad.stderr
    good = run_puffer(None, "eval", str(out), "--episodes", "1", "--json", "--kwarg", "max_episode_steps=7")
    assert good.returncode == 0, good.stderr
    assert max(json.loads(good.stdout)["lengths"]) <= 7
    resumed = run_puffer(None, "train", "--resume", str(out), "--steps", "512", "--kwarg", "sutton_barto_reward=maybe")
    assert resumed.returncode == 2 and "sutton_barto_reward=maybe: not true or false" in resumed.stderr
