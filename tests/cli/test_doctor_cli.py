"""`puffer doctor` and the known-bad warning of `puffer run` / `puffer train`, run as subprocesses
against matrix results written here (PUFFER_VERIFIED_DIR) about this very installation."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import platform

import pytest
from plugin_site import run_puffer

import puffer_core

PY = ".".join(platform.python_version_tuple()[:2])
GYMNASIUM = metadata.version("gymnasium")
NUMPY = metadata.version("numpy")
REASON = "a reason the test gave: this gymnasium breaks classic"


def write_verified(folder, gymnasium=GYMNASIUM, known_bad=(), python=PY):
    """A verified.json where classic passed on ``python`` with ``gymnasium`` (and this numpy and puffer-core)."""
    folder.mkdir(exist_ok=True)
    resolved = {"gymnasium": gymnasium, "numpy": NUMPY, "puffer-core": puffer_core.__version__}
    data = {
        "schema": 1,
        "default_python": python,
        "plugins": {"classic": {"distribution": None, "package": "gymnasium", "known_bad": list(known_bad)}},
        "cells": [
            {
                "id": f"classic-gymnasium{gymnasium}-py{python}",
                "plugin": "classic",
                "python": python,
                "pins": {"gymnasium": gymnasium},
                "resolved": resolved,
                "outcome": "pass",
                "reason": None,
            }
        ],
        "commons": {python: {"outcome": "pass", "members": {"classic": {"gymnasium": gymnasium}}, "dropped": {}}},
    }
    (folder / "verified.json").write_text(json.dumps(data))
    return folder


def puffer(folder, *args):
    # No installed plugin loads: the matrix written here knows only classic.
    return run_puffer(None, *args, extra_env={"PUFFER_VERIFIED_DIR": str(folder), "PUFFER_LOAD_PLUGINS": ""})


@pytest.fixture
def verified(tmp_path):
    return write_verified(tmp_path / "verified")


@pytest.fixture
def known_bad(tmp_path):
    return write_verified(tmp_path / "bad", known_bad=[{"when": {"gymnasium": f"=={GYMNASIUM}"}, "reason": REASON}])


def test_doctor_exits_0_when_everything_is_verified(verified):
    proc = puffer(verified, "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"✓  plugin classic (built in) (gymnasium {GYMNASIUM})" in proc.stdout
    assert f"✓  Python {platform.python_version()}" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "everything installed is verified"
    data = json.loads(puffer(verified, "doctor", "--json").stdout)
    assert data["ok"] is True and data["schema"] == 1
    assert [p["name"] for p in data["plugins"]] == ["classic"]
    assert data["plugins"][0]["cell"] == f"classic-gymnasium{GYMNASIUM}-py{PY}"


def test_doctor_names_the_reason_of_a_known_bad_set(known_bad):
    proc = puffer(known_bad, "doctor")
    assert proc.returncode == 1
    line = next(line for line in proc.stdout.splitlines() if "plugin classic" in line)
    assert line.startswith("✗") and "known bad" in line and REASON in line
    assert "fix classic: pip install -c <(puffer constraints) gymnasium" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "1 known bad"
    data = json.loads(puffer(known_bad, "doctor", "--json").stdout)
    assert data["ok"] is False and data["plugins"][0]["verdict"] == "known bad"
    assert data["plugins"][0]["reason"] == REASON


def test_doctor_names_the_nearest_verified_set_of_what_no_cell_ran(tmp_path):
    folder = write_verified(tmp_path / "other", gymnasium="0.0.1")
    proc = puffer(folder, "doctor")
    assert proc.returncode == 1
    assert f"no cell on Python {PY} ran gymnasium {GYMNASIUM}" in proc.stdout
    assert "fix classic: pip install -c <(puffer constraints) gymnasium" in proc.stdout
    data = json.loads(puffer(folder, "doctor", "--json").stdout)
    assert data["plugins"][0]["verdict"] == "not verified" and data["plugins"][0]["nearest"] == {"gymnasium": "0.0.1"}


def test_doctor_on_a_python_the_matrix_never_ran(tmp_path):
    folder = write_verified(tmp_path / "elsewhere", python="3.1")
    data = json.loads(puffer(folder, "doctor", "--json").stdout)
    assert data["ok"] is False
    assert data["python"] == {
        "name": "python",
        "version": PY,
        "verdict": "not verified",
        "reason": f"the matrix ran nothing on Python {PY}; verified on 3.1",
        "fix": "use Python 3.1 (e.g. uv venv --python 3.1)",
        "cell": None,
        "nearest": None,
        "installed": {},
    }


def test_doctor_without_the_matrix_data_is_a_one_line_error(tmp_path):
    proc = puffer(tmp_path, "doctor")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        f"error: {tmp_path / 'verified.json'} is missing: this puffer-core was installed without the matrix's data\n"
    )


def test_doctor_help_explains_the_verdicts(verified):
    text = puffer(verified, "doctor", "--help").stdout
    for words in (
        "✓ verified",
        "! not verified",
        "✗ known bad",
        "Exits 0 only",
        "pip install -c <(puffer constraints)",
    ):
        assert words in text


def test_run_warns_once_for_a_known_bad_set_and_not_for_a_verified_one(known_bad, verified):
    proc = puffer(known_bad, "run", "classic/cartpole", "--steps", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: classic as installed (gymnasium {GYMNASIUM}, Python {PY}) is known bad: {REASON} "
        "(`puffer doctor` names the verified set)"
    ]
    assert json.loads(proc.stdout)["steps"] >= 50
    quiet = puffer(verified, "run", "classic/cartpole", "--steps", "50", "--json")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_train_warns_once_for_a_known_bad_set(known_bad, tmp_path):
    # Without torch, train stops after its plan (and after the warning): the warning is what is tested.
    proc = puffer(known_bad, "train", "classic/probe_1", "--steps", "256", "--out", str(tmp_path / "run"))
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and REASON in warnings[0], proc.stderr
    if _has_torch():
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == 1 and "puffer train needs torch" in proc.stderr.splitlines()[-1]


def _has_torch() -> bool:
    try:
        metadata.version("torch")
    except metadata.PackageNotFoundError:
        return False
    return True
