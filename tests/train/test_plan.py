"""A run is resolved once (puffer_core.train.plan): `puffer train`, `--resume`, `puffer eval`, ``ppo()``
and a sweep look the env id up once (``PluginSet.get_spec``), read a resumed checkpoint once and
validate the settings a fixed number of times, however many envs the run builds; the plan says
what the CLI prints before anything is built."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from optional import require

from puffer_core.env.environments import SpecCreator
from puffer_core.errors import APIUsageError, UnknownEnvError
from puffer_core.plugins import PluginSet, get_plugins
from puffer_core.train.config import PPOConfig
from puffer_core.train.plan import plan_run

#: What each counted call is: an env id looked up, a checkpoint read, settings validated.
COUNTED = {"get_spec": (PluginSet, "get_spec"), "validate": (PPOConfig, "validate")}


@contextlib.contextmanager
def counting(monkeypatch: pytest.MonkeyPatch, *extra: tuple[str, object, str]) -> Iterator[collections.Counter]:
    """Counts of the calls in ``COUNTED`` (and ``extra``: (key, owner, name)) made inside the block."""
    counts: collections.Counter = collections.Counter()
    for key, (owner, name) in {**COUNTED, **{key: (owner, name) for key, owner, name in extra}}.items():
        original = getattr(owner, name)

        def counted(*args, _original=original, _key=key, **kwargs):
            counts[_key] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
    yield counts
    monkeypatch.undo()


def test_a_new_run_is_planned_without_torch_and_once():
    plan = plan_run("classic/probe_1", settings={"num_envs": 8, "steps": 64}, env_kwargs={"number": 2})
    assert plan.env == "classic/probe_1" and plan.spec is get_plugins().get_spec("classic/probe_1")
    assert plan.env_kwargs == {"number": 2} and plan.config == PPOConfig(num_envs=8, steps=64)
    assert isinstance(plan.vector_env(), SpecCreator) and plan.vector_env().spec is plan.spec
    assert plan.describe() == [] and plan.saved is None and plan.out is None
    nethack = plan_run("nethack/score", settings={"num_envs": 8})
    assert nethack.describe()[0].startswith("nethack/score: training defaults of the nethack plugin: ")
    assert nethack.config.num_envs == 8 and "observation_keys" in nethack.env_kwargs


def test_bad_plans_are_one_line_errors(tmp_path):
    (tmp_path / "file").write_text("")
    cases = [
        ({}, APIUsageError, "give an env id (e.g. classic/cartpole) or resume=DIR"),
        ({"env": "classic/nope"}, UnknownEnvError, "unknown environment 'classic/nope'"),
        ({"env": 3}, APIUsageError, "env must be an env id (e.g. classic/cartpole) or a zero-argument creator, got 3"),
        ({"env": "classic/probe_1", "settings": {"gamma": 2}}, APIUsageError, "gamma must be a number in [0, 1]"),
        ({"env": "classic/probe_1", "out": tmp_path / "file"}, APIUsageError, "is a file; give a directory"),
        ({"resume": tmp_path}, APIUsageError, "plan_run(resume=…) needs load="),
    ]
    for arguments, error, fragment in cases:
        with pytest.raises(error) as caught:
            plan_run(**arguments)
        assert fragment in str(caught.value) and "\n" not in str(caught.value), (arguments, caught.value)


require("torch")
require("matplotlib")

from puffer_core import train  # noqa: E402
from puffer_core.cli.main import cli  # noqa: E402
from puffer_core.train import checkpoint  # noqa: E402


def test_the_plan_names_the_checkpoint_file_as_checkpoint_writes_it():
    from puffer_core.train import plan

    assert plan.CHECKPOINT_FILE == checkpoint.FILENAME  # plan.py names it without importing torch


def puffer(*args: str) -> str:
    """`puffer ARGS` in this process (so its calls are counted); its stderr."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stderr


def test_puffer_train_resume_and_eval_look_the_env_up_once_and_read_the_checkpoint_once(tmp_path, monkeypatch):
    out = tmp_path / "run"
    load = ("load", checkpoint, "load")
    # Before: 19 lookups (train: 3, and 2 for each of the 8 envs built), 6 validations; on
    # --resume 2 reads of the checkpoint; eval 4 lookups and 2 reads.
    with counting(monkeypatch, load) as counts:
        puffer("train", "classic/probe_1", "--steps", "256", "--num-envs", "8", "--out", str(out), "--json")
    assert counts == {"get_spec": 1, "validate": 1}
    with counting(monkeypatch, load) as counts:
        said = puffer("train", "--resume", str(out), "--steps", "512", "--json")
    assert said.startswith("resuming 'classic/probe_1' at step 256 with no kwargs and the settings num_envs=8, ")
    assert f"(from {out / 'policy.pt'}; --kwarg K=V and --set KEY=VALUE override)" in said
    # validated: the settings given, before torch loads; the checkpoint's, when read; the run's.
    assert counts == {"get_spec": 1, "load": 1, "validate": 3}
    assert train.load(out).step == 512
    with counting(monkeypatch, load) as counts:
        said = puffer("eval", str(out), "--episodes", "2")
    assert said == f"playing 'classic/probe_1' with no kwargs (from {out / 'policy.pt'}; --kwarg K=V overrides)\n"
    assert counts == {"get_spec": 1, "load": 1, "validate": 1}


def test_ppo_and_evaluate_look_the_env_up_once(tmp_path, monkeypatch):
    with counting(monkeypatch) as counts:
        train.ppo("classic/probe_2", 128, out=tmp_path, num_envs=16)
    assert counts == {"get_spec": 1, "validate": 1}
    with counting(monkeypatch) as counts:
        played = train.evaluate(tmp_path, episodes=3)
    assert counts == {"get_spec": 1, "validate": 1} and len(played.returns) == 3


def test_a_sweep_looks_the_env_up_once_for_all_its_trials(tmp_path, monkeypatch):
    require("optuna")
    from puffer_core.train.sweeps import sweep

    with counting(monkeypatch) as counts:
        result = sweep(
            "classic/probe_1",
            trials=2,
            steps=128,
            params=["ent_coef=0:0.05"],
            out=tmp_path,
            settings={"num_envs": 8},
        )
    assert result.trials == 2 and sorted(p.name for p in (tmp_path / "trials").iterdir()) == ["0000", "0001"]
    # validated: the searched range's two ends, the trials' shared settings, then each trial's own.
    assert counts == {"get_spec": 1, "validate": 2 + 1 + 2}


def test_a_plugins_default_that_the_user_replaces_is_not_held_against_the_run():
    from puffer_core.train.defaults import TrainDefaults

    stale = TrainDefaults("tuned/probe", "tuned", {"gamma": 3})
    with pytest.raises(APIUsageError, match=r"^plugin 'tuned': the train_defaults of tuned/probe .*gamma"):
        stale.config({})
    with pytest.raises(APIUsageError, match=r"^plugin 'tuned': .*gamma"):
        stale.config({"num_envs": 0})  # both bad: the plugin's is named
    assert stale.config({"gamma": 0.5}).gamma == 0.5
