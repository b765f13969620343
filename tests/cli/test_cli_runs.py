"""`puffer train --detach` and `puffer runs` for real (outside the tank): a detached run
outlives the shell that started it, a SIGKILL turns it to interrupted, `puffer runs resume
--interrupted` completes it with no gap in its curve, `puffer runs stop` stops it for good.
tests/tank/test_tank_runs_docker.py does the same through an engine's crash and restart."""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optional import require

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path):
    require("torch")
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PUFFER_DEBUG": ""}


def puffer(env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "puffer_core.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


def listed(env: dict, out: Path) -> dict:
    proc = puffer(env, "runs", "--json")
    assert proc.returncode == 0, proc.stderr
    return next(row for row in json.loads(proc.stdout) if row["out"] == str(out))


def wait_for(condition, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout:.0f} s")


TRAIN = ["classic/cartpole", "--steps", "200000", "--set", "checkpoint_seconds=2"]


def test_a_detached_run_outlives_its_shell_and_a_kill(env, tmp_path):
    out = tmp_path / "run"
    started = time.monotonic()
    command = " ".join([sys.executable, "-m", "puffer_core.cli.main", "train", *TRAIN, "--out", str(out), "--detach",
                        "--json", ";", "exit 0"])  # fmt: skip
    shell = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)
    assert shell.returncode == 0, shell.stderr
    assert time.monotonic() - started < 60  # it returned; the run goes on without the shell
    launched = json.loads(shell.stdout)
    assert launched["out"] == str(out) and launched["log"] == str(out / "train.log")
    wait_for(lambda: listed(env, out)["checkpoint_age_seconds"] is not None, "a first checkpoint")
    row = listed(env, out)
    assert row["state"] == "running" and row["pid"] == launched["pid"] and row["detached"] and row["auto_resume"]
    os.kill(launched["pid"], signal.SIGKILL)  # as a crash would: no chance to save or say anything
    wait_for(lambda: listed(env, out)["state"] == "interrupted", "interrupted")
    assert listed(env, out)["resume"] == f"puffer runs resume {out}"
    resumed = puffer(env, "runs", "resume", "--interrupted")
    assert resumed.returncode == 0 and f"resumed {out} in the background" in resumed.stderr, resumed.stderr
    wait_for(lambda: listed(env, out)["state"] == "finished", "finished")
    row = listed(env, out)
    assert row["step"] >= 200_000 and row["steps"] == 200_000
    with open(out / "curve.csv") as file:
        steps = [int(float(r["step"])) for r in csv.DictReader(file)]
    assert steps[-1] >= 200_000 and steps == sorted(steps)
    update = 32 * 32  # num_envs x rollout_steps: one row per update
    assert max(b - a for a, b in itertools.pairwise(steps)) <= 2 * update, "a gap in the curve: steps were lost"
    log = (out / "train.log").read_text()
    assert log.count("== ") == 2 and "train --resume" in log  # two launches, one log


def test_a_run_stopped_by_its_user_stays_stopped(env, tmp_path):
    out = tmp_path / "run"
    proc = puffer(env, "train", *TRAIN, "--steps", "10000000", "--out", str(out), "--detach", "--json")
    assert proc.returncode == 0, proc.stderr
    wait_for(lambda: listed(env, out)["checkpoint_age_seconds"] is not None, "a first checkpoint")
    stopped = puffer(env, "runs", "stop", str(out))
    assert stopped.returncode == 0 and f"stopped {out} at step" in stopped.stderr, stopped.stderr
    row = listed(env, out)
    assert row["state"] == "stopped" and row["resume"] == f"puffer runs resume {out}"
    # Its log (no terminal): the device and a progress line at the first update, then the stop said as a stop.
    log = (out / "train.log").read_text()
    assert re.search(r"^device: cpu\nstep [\d,]+/", log, re.MULTILINE), log
    assert re.search(r"^step [\d,]+/10,000,000 \([\d.]+%\) \| [\d,]+ steps/s \| return \S+ \| elapsed "
                     r"[\dhms]+ \| eta [\dhms]+$", log, re.MULTILINE), log  # fmt: skip
    assert re.search(rf"^stopped at step [\d,]+ by SIGTERM; policy.pt saved in {re.escape(str(out))}", log, re.M), log
    assert "error:" not in log
    auto = puffer(env, "runs", "resume", "--interrupted", "--auto")
    assert "no interrupted run to resume here" in auto.stderr and listed(env, out)["state"] == "stopped"
    refused = puffer(env, "runs", "stop", str(out))
    assert refused.returncode == 1 and "is stopped, not running here" in refused.stderr
    # Moved to another box (another registry): the folder alone resumes there.
    moved, elsewhere = tmp_path / "moved", {**env, "XDG_STATE_HOME": str(tmp_path / "other-state")}
    shutil.copytree(out, moved)
    resumed = puffer(elsewhere, "runs", "resume", str(moved))
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: (listed(elsewhere, moved)["step"] or 0) > row["step"], "the moved run stepping")
    assert puffer(elsewhere, "runs", "stop", str(moved)).returncode == 0


def test_a_sigterm_nobody_asked_for_is_an_interruption(env, tmp_path):
    """A box shutting down sends SIGTERM: the run saves its checkpoint and reads interrupted, so
    it resumes after the boot; only `puffer runs stop` (or Ctrl-C) makes a stop for good."""
    out = tmp_path / "run"
    proc = puffer(env, "train", *TRAIN, "--steps", "10000000", "--out", str(out), "--detach", "--json")
    pid = json.loads(proc.stdout)["pid"]
    wait_for(lambda: listed(env, out)["checkpoint_age_seconds"] is not None, "a first checkpoint")
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: listed(env, out)["state"] != "running", "the run to end")
    assert listed(env, out)["state"] == "interrupted"
    assert puffer(env, "runs", "stop", str(out)).returncode == 1


def test_detach_refuses_what_a_foreground_run_refuses(env, tmp_path):
    proc = puffer(env, "train", "classic/no-such-env", "--out", str(tmp_path / "run"), "--detach")
    assert proc.returncode != 0 and "no-such-env" in proc.stderr and not (tmp_path / "run" / "train.log").exists()
    proc = puffer(env, "train", "classic/cartpole", "--no-auto-resume")
    assert proc.returncode == 2 and "--no-auto-resume goes with --detach" in proc.stderr
