"""`puffer_core.train.restore`: what a saved run brings back. A checkpoint's env kwargs reach the
creator only where the env's plugin declares them restorable (NetHack's ``savedir`` never does:
a checkpoint carrying it makes no directory), unless trusted or dropped; ``--kwarg`` replaces
one. A resumed run prints every setting it adopts and refuses workers, envs and torch threads
beyond this machine, as a file must not size this machine's work."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from optional import require
from plugin_site import puffer_env, run_puffer_many
from stored_run import OLD_CHECKPOINT

from puffer_core.errors import APIUsageError
from puffer_core.train.config import RAY_ONLY, PPOConfig
from puffer_core.train.restore import (
    ENVS_PER_CPU,
    WORKERS_PER_CPU,
    check_fits_machine,
    names_an_env,
    restored_kwargs,
    saved_env_spec,
)

SOURCE = "run/policy.pt"


@pytest.mark.parametrize(
    ("env", "saved", "given", "mode", "expected"),
    [
        ("classic/probe_1", {"number": 2}, None, "check", {"number": 2}),
        ("classic/probe_1", {"number": 2}, {"number": 3}, "check", {"number": 3}),
        ("nethack/score", {"savedir": "/x", "max_episode_steps": 9}, {"savedir": "/y"}, "check", None),
        ("nethack/score", {"savedir": "/x", "max_episode_steps": 9}, None, "drop", {}),
        ("nethack/score", {"savedir": "/x"}, {"max_episode_steps": 9}, "drop", {"max_episode_steps": 9}),
        ("nethack/score", {"savedir": "/x"}, None, "trust", {"savedir": "/x"}),
    ],
)
def test_saved_kwargs_are_checked_trusted_dropped_or_replaced(env, saved, given, mode, expected):
    expected = {**saved, **given} if expected is None else expected
    assert restored_kwargs(env, saved, given, mode, SOURCE) == expected


@pytest.mark.parametrize(
    ("env", "saved", "fragment"),
    [
        (
            "nethack/score",
            {"savedir": "/elsewhere", "save_ttyrec_every": 1, "max_episode_steps": 9},
            "refused the saved env kwargs 'savedir', 'save_ttyrec_every' (savedir='/elsewhere' is not one the plugin "
            "declares restorable; save_ttyrec_every=1 is not one",
        ),
        ("atari/pong", {"frame_stack": 1_000_000}, "frame_stack=1000000 must be an int from 1 to 16"),
        ("atari/pong", {"screen_size": 100_000, "grayscale": True}, "'screen_size' (screen_size=100000 must be"),
        ("classic/probe_1", {"number": "\x1b[2J"}, "(number='\\x1b[2J' must be an int from 1 to 5)"),
        (lambda: None, {"number": 2}, "number=2 is not declared (a creator declares none)"),
    ],
)
def test_kwargs_not_declared_restorable_or_out_of_bounds_are_refused_in_one_line(env, saved, fragment):
    with pytest.raises(APIUsageError) as caught:
        restored_kwargs(env, saved, None, "check", SOURCE)
    message = str(caught.value)
    assert message.startswith(f"{SOURCE}: refused the saved env kwargs ") and fragment in message, message
    assert "--trust-kwargs" in message and "--no-saved-kwargs" in message and "\n" not in message


def test_a_bad_mode_is_named():
    with pytest.raises(APIUsageError, match=r"saved_kwargs must be one of 'check', 'trust', 'drop', got 'yes'"):
        restored_kwargs("classic/probe_1", {}, None, "yes", SOURCE)


@pytest.mark.parametrize(
    ("name", "value", "limit"),
    [("num_workers", 1_024, 2 * WORKERS_PER_CPU), ("num_envs", 65_536, 2 * ENVS_PER_CPU), ("torch_threads", 1_024, 2)],
)
def test_saved_settings_beyond_this_machine_are_refused_unless_given(name, value, limit):
    config = PPOConfig(**{name: value})
    # The attack: the bounds --set has (PPOConfig.validate) take these values.
    assert PPOConfig.from_saved(config.to_dict(), SOURCE) == config
    # The fix: adopted from a file, they must fit this machine; given by the caller, they are theirs.
    with pytest.raises(APIUsageError) as caught:
        check_fits_machine(config, {name: value}, SOURCE, cpus=2)
    assert str(caught.value) == (
        f"{SOURCE}: its {name}={value:,} is more than this machine's 2 CPU(s) run (at most {limit:,} when read from "
        f"a checkpoint); give --set {name}=N (Python: {name}=N) to choose"
    )
    check_fits_machine(config, {}, SOURCE, cpus=2)
    check_fits_machine(PPOConfig(**{name: limit}), {name: limit}, SOURCE, cpus=2)


@pytest.mark.parametrize(
    ("saved", "expected"),
    [("classic/cartpole", "classic/cartpole"), ("CartPole-v1", "classic/cartpole"), ("FrozenLake-v1", "FrozenLake-v1")],
)
def test_a_checkpoints_env_is_a_plugin_id_an_alias_or_a_registered_gymnasium_id(saved, expected):
    assert names_an_env(saved)
    assert saved_env_spec(saved, SOURCE).id == expected


@pytest.mark.parametrize("saved", ["ScoredProbe", "make.<locals>.env", "functools.partial(<function f>)"])
def test_a_creators_name_is_said_to_be_one(saved):
    """A run trained on a creator saves its name: some names read as gymnasium ids, none is registered."""
    assert not names_an_env(saved)
    with pytest.raises(APIUsageError, match=r"\(a creator's name, or an id registered by code not run here\)"):
        saved_env_spec(saved, SOURCE)


require("torch")
require("matplotlib")
import torch  # noqa: E402

from puffer_core import train  # noqa: E402


def copy_run(directory: Path, **config) -> Path:
    """The stored probe_1 run (512 steps, 4 envs, hidden_size 4), with ``config`` changed, in ``directory``."""
    data = torch.load(OLD_CHECKPOINT, weights_only=True)
    data["config"].update(config)
    directory.mkdir(parents=True)
    torch.save(data, directory / "policy.pt")
    return directory


@pytest.mark.parametrize(("name", "value"), [("num_workers", 1_024), ("num_envs", 65_536), ("torch_threads", 1_024)])
def test_a_resumed_run_refuses_absurd_saved_settings_but_takes_them_given(tmp_path, name, value):
    run = copy_run(tmp_path / "run", **{name: value})
    with pytest.raises(APIUsageError, match=rf"run: its {name}={value:,} is more than this machine's"):
        train.ppo(resume=run, steps=1024)
    given = {"torch_threads": 1, "num_envs": 4, "num_workers": 1}[name]
    curve = train.ppo(resume=run, steps=1024, **{name: given})
    assert curve.rows[-1]["step"] >= 1024 and train.load(run).settings().to_dict()[name] == given


def test_puffer_train_resume_prints_every_setting_it_adopts(tmp_path):
    run = copy_run(tmp_path / "run", learning_rate=0.001, num_workers=1_024)
    refused, resumed = run_puffer_many(
        [
            ("train", "--resume", str(run), "--steps", "1024"),
            ("train", "--resume", str(run), "--steps", "1024", "--set", "num_workers=2", "--json"),
        ],
        puffer_env(None),
        preload=("torch",),
    )
    assert refused.returncode == 1 and "its num_workers=1,024 is more than this machine's" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert resumed.returncode == 0, resumed.stderr
    line = resumed.stderr.strip().splitlines()[0]
    assert line.startswith("resuming 'classic/probe_1' at step 512 with no kwargs and the settings num_envs=4, "), line
    given = ("steps", "num_workers")
    adopted = [f.name for f in dataclasses.fields(PPOConfig) if f.name not in (*RAY_ONLY, *given)]
    shown = line.split(" and the settings ", 1)[1]
    assert [part.split("=")[0] for part in shown.split(" (from ")[0].split(", ")] == adopted, line
    assert "learning_rate=0.001" in line and "hidden_size=4" in line and "num_workers" not in line


@pytest.fixture(scope="module")
def nethack_run(tmp_path_factory):
    """A short NetHack run with the plugin's observation keys, episodes capped at 16 steps."""
    require("nle")
    out = tmp_path_factory.mktemp("nethack") / "run"
    settings = {"backend": "serial", "num_envs": 2, "rollout_steps": 16, "hidden_size": 8}
    train.ppo("nethack/score", 32, out=out, env_kwargs={"max_episode_steps": 16}, **settings)
    return out


def test_a_nethack_checkpoint_carrying_savedir_makes_no_directory(nethack_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(nethack_run, run)
    data = torch.load(run / "policy.pt", weights_only=True)
    target = tmp_path / "elsewhere" / "ttyrecs"
    data["env_kwargs"].update(savedir=str(target), save_ttyrec_every=1)
    torch.save(data, run / "policy.pt")
    observed = repr(list(data["env_kwargs"]["observation_keys"])).replace("'", '"')
    play = ("eval", str(run), "--episodes", "1")
    cases = [
        play,
        (*play, "--no-saved-kwargs", "--kwarg", f"observation_keys={observed}", "--kwarg", "max_episode_steps=16"),
        (*play, "--kwarg", f"savedir={tmp_path / 'mine'}", "--kwarg", "save_ttyrec_every=0"),
    ]
    refused, dropped, replaced = run_puffer_many(cases, puffer_env(None), preload=("torch",))
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "refused the saved env kwargs 'savedir', 'save_ttyrec_every'" in refused.stderr
    assert dropped.returncode == 0 and replaced.returncode == 0, (dropped.stderr, replaced.stderr)
    with pytest.raises(APIUsageError, match="refused the saved env kwargs 'savedir', 'save_ttyrec_every'"):
        train.evaluate(run, episodes=1)
    assert not (tmp_path / "elsewhere").exists()
    # What the checkpoint did before (and does when trusted): nle makes and writes that tree.
    train.evaluate(run, episodes=1, saved_kwargs="trust")
    assert target.is_dir() and any(target.iterdir())


def test_a_gymnasium_id_trains_resumes_by_its_alias_and_plays(tmp_path):
    """FrozenLake-v1 (gymnasium's own) and CartPole-v1 (classic/cartpole's alias) through ppo, resume and evaluate."""
    settings = {"num_envs": 4, "rollout_steps": 32, "hidden_size": 8, "backend": "serial"}
    lake = tmp_path / "lake"
    train.ppo("FrozenLake-v1", 256, out=lake, env_kwargs={"is_slippery": False}, **settings)
    assert train.load(lake).env == "FrozenLake-v1" and train.load(lake).env_kwargs == {"is_slippery": False}
    played = train.evaluate(lake, episodes=2, saved_kwargs="trust")
    assert played.env == "FrozenLake-v1" and len(played.returns) == 2
    cart = tmp_path / "cart"
    train.ppo("CartPole-v1", 256, out=cart, **settings)
    assert train.load(cart).env == "classic/cartpole"  # the plugin's env, by its own id
    curve = train.ppo("CartPole-v1", 512, resume=cart)  # the alias names the same env
    assert curve.rows[-1]["step"] >= 512
    for other in ("Acrobot-v1", "nothing/here"):
        with pytest.raises(APIUsageError, match=f"trained on 'classic/cartpole', not '{other}'"):
            train.ppo(other, 1024, resume=cart)
