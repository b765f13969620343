"""`puffer sweep` / `puffer_core.train.sweep` (sweeps.py): an Optuna study that resumes where it stopped.

The sweep runs as a user runs it (the CLI in a subprocess), is interrupted with SIGINT
after its first trial, and a re-run finishes the study without repeating a finished trial;
the study itself is read back with Optuna.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from optional import require
from plugin_site import puffer_env, run_puffer, run_puffer_many

from puffer_core.errors import APIUsageError
from puffer_core.train.sweep_params import check_params, parse_param

require("torch")
require("matplotlib")
optuna = require("optuna")

from puffer_core import train  # noqa: E402

PARAMS = ("--param", "learning_rate=1e-3:1e-2:log", "--param", "ent_coef=0:0.05")


def load_study(out):
    return optuna.load_study(study_name="puffer-sweep", storage=f"sqlite:///{out / 'study.db'}")


def sweep_command(out, *extra):
    args = ["sweep", "classic/cartpole", "--trials", "3", "--steps", "4096", *PARAMS, "--set", "num_envs=8"]
    return [sys.executable, "-m", "puffer_core.cli.main", *args, "--out", str(out), *extra]


def interrupt_after_first_trial(out) -> tuple[int, str]:
    """Run the sweep, SIGINT it once its first trial's line is out; (exit code, stderr)."""
    proc = subprocess.Popen(sweep_command(out), stderr=subprocess.PIPE, text=True, env=puffer_env(None))
    lines = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if not line or line.startswith("trial 1/3"):
                break
        assert lines[-1].startswith("trial 1/3"), lines
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=120)[1]
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, "".join(lines) + rest


def test_a_sweep_stopped_by_sigint_resumes_without_repeating_a_trial_and_its_best_trains(tmp_path):
    out = tmp_path / "sweep"
    code, stderr = interrupt_after_first_trial(out)
    assert code == 130, stderr
    assert "sweep stopped by SIGINT with 1 of 3 trials done" in stderr and "Traceback" not in stderr, stderr
    assert out.stat().st_mode & 0o777 == 0o700  # made by the sweep: private to the user
    study = load_study(out)
    first = study.trials[0]
    assert first.state.name == "COMPLETE" and set(first.params) == {"learning_rate", "ent_coef"}
    assert not [t for t in study.trials[1:] if t.state.name == "COMPLETE"]  # stopped mid-trial, or between two

    proc = subprocess.run(sweep_command(out, "--json"), capture_output=True, text=True, env=puffer_env(None))
    assert proc.returncode == 0, proc.stderr
    assert "trial 2/3" in proc.stderr and "trial 3/3" in proc.stderr and "trial 1/3" not in proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["trials"] == 3
    study = load_study(out)
    counted = [t for t in study.trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(counted) == 3 and counted[0].number == 0
    assert study.trials[0].datetime_complete == first.datetime_complete  # kept, not run again
    assert len({json.dumps(t.params, sort_keys=True) for t in counted}) == 3
    # the interrupted one ran again with the settings it had drawn (if the signal came before
    # it drew any, there is nothing to repeat)
    for failed in (t for t in study.trials if t.state.name == "FAIL" and t.params):
        assert any(failed.params.items() <= t.params.items() and t.number > failed.number for t in counted)
    # Each update's mean return is the trial's learning curve, for the pruner.
    assert max(counted[0].intermediate_values) <= 4096 and counted[0].intermediate_values

    best = json.loads((out / "best.json").read_text())
    assert best == summary["best"] and best["trial"] in {t.number for t in counted}
    assert best["value"] == max(t.value for t in counted if t.state.name == "COMPLETE")
    assert best["command"].startswith("puffer train classic/cartpole --steps 4096 --set num_envs=8 --set ")
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "trials" / "0000" / "tensorboard").is_dir()  # each trial's own logs

    sets = [arg for key, value in best["settings"].items() for arg in ("--set", f"{key}={json.dumps(value)}")]
    proc = run_puffer(None, "train", "classic/cartpole", "--steps", "256", *sets, "--out", str(tmp_path / "best"))
    assert proc.returncode == 0, proc.stderr
    # best.toml: the same settings as a config file, which puffer train takes as it is.
    proc = run_puffer(None, "train", "--config", str(out / "best.toml"), "--steps", "256", "--out",
                      str(tmp_path / "best-toml"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    repeated = (tmp_path / "best-toml" / "config.toml").read_text()
    assert 'env = "classic/cartpole"' in repeated and "steps = 256" in repeated
    for key, value in best["settings"].items():
        assert f"{key} = {json.dumps(value)}" in repeated or f"{key} = {value!r}" in repeated, key


def test_a_rerun_of_a_finished_sweep_runs_nothing_and_more_trials_run_only_the_new_ones(tmp_path):
    common = dict(steps=1024, params=["ent_coef=0:0.05", "num_envs=4:16"], out=tmp_path, settings={"rollout_steps": 16})
    first = train.sweep("classic/probe_2", trials=2, **common)
    assert first.trials == 2 and first.best is not None
    reports = []
    again = train.sweep("classic/probe_2", trials=2, on_trial=reports.append, **common)
    assert again.trials == 2 and reports == []
    train.sweep("classic/probe_2", trials=3, on_trial=reports.append, **common)
    assert [(r.done, r.total) for r in reports] == [(3, 3)]
    trials = load_study(tmp_path).trials
    assert len(trials) == 3 and all(isinstance(t.params["num_envs"], int) for t in trials)
    with pytest.raises(APIUsageError, match="holds another sweep"):
        train.sweep("classic/probe_1", trials=3, **common)


@pytest.mark.slow
def test_parallel_jobs_share_the_study_and_stop_at_the_total(tmp_path):
    result = train.sweep(
        "classic/probe_2", trials=3, steps=1024, params=["ent_coef=0:0.05"], out=tmp_path, jobs=2,
        settings={"num_envs": 8},
    )  # fmt: skip
    assert result.trials == 3
    trials = load_study(tmp_path).trials
    assert len(trials) == 3 and all(t.state.name == "COMPLETE" for t in trials)
    assert len({t.params["ent_coef"] for t in trials}) == 3  # the workers' samplers differ


def test_a_sweep_directory_others_can_write_or_a_symlinked_lock_is_refused(tmp_path):
    victim = tmp_path / "bashrc"
    victim.write_text("keep\n")
    linked, shared = tmp_path / "linked", tmp_path / "shared"
    linked.mkdir()
    (linked / ".puffer-sweep.lock").symlink_to(victim)
    shared.mkdir()
    os.chmod(shared, 0o777)
    common = dict(trials=1, steps=64, params=["ent_coef=0:0.05"])
    with pytest.raises(APIUsageError, match=r"\.puffer-sweep\.lock is a symbolic link, not a lock file of yours"):
        train.sweep("classic/probe_1", out=linked, **common)
    with pytest.raises(APIUsageError, match=f"^{shared} is writable by others"):
        train.sweep("classic/probe_1", out=shared, **common)
    assert victim.read_text() == "keep\n" and os.listdir(shared) == [] and os.listdir(linked) == [".puffer-sweep.lock"]


def test_param_specs_read_back_as_they_were_given():
    assert parse_param("learning_rate=1e-4:1e-2:log").spec() == "learning_rate=0.0001:0.01:log"
    assert parse_param("num_envs=8:64").kind == "int"
    assert parse_param("anneal_lr=true,false").choices == (True, False)
    assert parse_param("backend=serial,multiprocessing").choices == ("serial", "multiprocessing")
    with pytest.raises(APIUsageError, match="both searched"):
        check_params(["ent_coef=0:1"], {"ent_coef": 0.1})


def test_bad_sweep_input_is_one_line(tmp_path):
    base = ("sweep", "classic/cartpole", "--trials", "3", "--steps", "64", "--out", str(tmp_path / "s"))
    cases = [
        (("--param", "nonsense=1:2"), "PPO has no setting 'nonsense'; the settings are: steps, num_envs"),
        (("--param", "lr=1e-4:1e-2:log"), "PPO has no setting 'lr' (did you mean learning_rate?); the settings"),
        (("--param", "ent_coef=0.5:0.1"), "low 0.5 is not below high 0.1"),
        (("--param", "learning_rate=0:1e-2:log"), "a log range must lie above 0, and it starts at 0"),
        (("--param", "learning_rate=-1e-3:1e-2:log"), "a log range must lie above 0"),
        (("--param", "learning_rate"), "is not NAME=LO:HI[:log] or NAME=A,B"),
        (("--param", "learning_rate=1e-3:1e-2:cubic"), "is not NAME=LO:HI or NAME=LO:HI:log"),
        (("--param", "learning_rate=a:b"), "'a' is not a number"),
        (("--param", "num_envs=8.5:64"), "num_envs is a whole number, got '8.5'"),
        (("--param", "gamma=0:2"), "gamma must be a number in [0, 1], got 2"),
        (("--param", "anneal_lr=0:1"), "anneal_lr takes values, not a range"),
        (("--param", "steps=1:2"), "steps is not searched"),
        (("--param", "ent_coef=0:0.1", "--set", "ent_coef=0.01"), "both searched (--param) and fixed (--set)"),
        (("--param", "ent_coef=0:0.1", "--param", "ent_coef=0:0.2"), "given twice"),
    ]
    procs = run_puffer_many([(*base, *args) for args, _ in cases], puffer_env(None))
    for (args, fragment), proc in zip(cases, procs):
        assert proc.returncode == 2 and fragment in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert not (tmp_path / "s").exists()
    proc = run_puffer(None, "sweep", "classic/cartpol", "--trials", "1", "--steps", "64", "--param", "ent_coef=0:1")
    assert proc.returncode != 0 and "Did you mean: classic/cartpole?" in proc.stderr


def test_a_sweep_without_optuna_is_one_line_before_anything_runs(tmp_path):
    # None in sys.modules is Python's own way to make an import fail: optuna is hidden from
    # this process only, as if it were not installed.
    script = "import sys; sys.modules['optuna'] = None; from puffer_core.cli.main import main; main()"
    out = tmp_path / "sweep"
    args = ["sweep", "classic/cartpole", "--trials", "1", "--steps", "64", "--param", "ent_coef=0:1", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=puffer_env(None), timeout=120
    )
    assert (
        proc.returncode == 1
        and "puffer sweep needs optuna, which is missing; pip install 'puffer-core[sweep]'" in proc.stderr
    )
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_the_median_pruner_stops_a_trial_whose_curve_falls_behind(tmp_path):
    # The study exists before the sweep with two trials queued, so which settings come first
    # is known: one that learns CartPole, then one that cannot (a learning rate of 1e-7).
    study = optuna.create_study(
        study_name="puffer-sweep", storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize"
    )
    study.enqueue_trial({"learning_rate": 0.01})
    study.enqueue_trial({"learning_rate": 1e-7})
    reports = []
    train.sweep(
        "classic/cartpole", trials=2, steps=8192, params=["learning_rate=1e-7:1e-2:log"], out=tmp_path,
        settings={"num_envs": 8}, startup_trials=1, on_trial=reports.append,
    )  # fmt: skip
    assert [(r.params["learning_rate"], r.outcome) for r in reports] == [(0.01, "complete"), (1e-7, "pruned")]
    assert 8192 // 4 <= reports[1].step < 8192  # stopped after the pruner's warm-up, before the end
    trials = load_study(tmp_path).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED"]
    assert not (tmp_path / "trials" / "0001" / "policy.pt").exists()  # a pruned trial saves nothing


def test_a_metric_no_episode_reports_is_one_error_naming_those_they_do(tmp_path):
    with pytest.raises(APIUsageError, match="reports 'scor'; give --metric one of: episode_length, episode_return"):
        train.sweep("classic/probe_1", trials=3, steps=256, params=["ent_coef=0:1"], out=tmp_path, metric="scor")
    assert [t.state.name for t in load_study(tmp_path).trials] == ["FAIL"]  # stopped at the first trial


def test_ctrl_c_stops_a_sweep_started_with_sigint_ignored():
    """A background job starts with SIGINT ignored; between trials the sweep still takes Ctrl-C
    (and gives the ignoring back when it ends)."""
    from puffer_core.train.sweep_workers import ctrl_c_interrupts

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt), ctrl_c_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the signal arrives within this
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
