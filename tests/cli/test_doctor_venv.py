"""`puffer doctor` in a real virtual environment, against the verified.json shipped in puffer-core:
the common set exits 0, gymnasium 1.4.0 gets what the matrix knows of it, a known-bad pin its reason."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from test_dist import fresh_env

from puffer_core.matrix import doctor
from puffer_core.matrix.model import DEFAULT_PYTHON
from puffer_core.matrix.shipped import SHIPPED_DIR, load_verified, shipped_pythons

ROOT = Path(__file__).resolve().parents[2]
#: A known-bad pair of the atari plugin's rules that installs (ale-py declares gymnasium >= 1.0).
ATARI_BAD = {"ale-py": "0.11.2", "gymnasium": "1.0.0"}


def atari_rule(data: dict) -> dict:
    """The atari rule ATARI_BAD matches (a rule without Python: it holds on any)."""
    for rule in data["plugins"]["atari"]["known_bad"]:
        when = rule["when"]
        if "python" not in when and set(when) == set(ATARI_BAD):
            if all(SpecifierSet(spec).contains(ATARI_BAD[name]) for name, spec in when.items()):
                return rule
    raise AssertionError(f"no known-bad rule of atari matches {ATARI_BAD}: pick a pair one matches")


@pytest.mark.slow
def test_doctor_in_a_fresh_venv_on_the_common_set_gymnasium_1_4_and_a_known_bad_pin(tmp_path):
    uv = shutil.which("uv")
    assert uv, "uv is part of the dev extra"
    data = load_verified()
    python = DEFAULT_PYTHON if DEFAULT_PYTHON in shipped_pythons() else shipped_pythons()[0]
    rule = atari_rule(data)
    venv, env = tmp_path / "venv", fresh_env()
    subprocess.run([uv, "venv", "-q", "--python", python, str(venv)], check=True, env=env, timeout=300)

    def install(*args: str) -> None:
        command = [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *args]
        subprocess.run(command, check=True, env=env, cwd=tmp_path, timeout=600)

    def puffer_doctor() -> tuple[int, dict, str]:
        command = [str(venv / "bin" / "puffer"), "doctor"]
        shown = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        proc = subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert proc.returncode == shown.returncode and proc.stderr == "", proc.stderr
        return proc.returncode, json.loads(proc.stdout), shown.stdout

    install("-e", str(ROOT), "-c", str(SHIPPED_DIR / f"constraints-py{python}.txt"))
    code, report, _ = puffer_doctor()
    assert code == 0 and report["ok"], report
    assert [p["name"] for p in report["plugins"]] == ["classic"] and report["plugins"][0]["verdict"] == "verified"

    install("gymnasium==1.4.0")
    code, report, shown = puffer_doctor()
    frozen = subprocess.run(
        [uv, "pip", "freeze", "--python", str(venv / "bin" / "python")], capture_output=True, text=True, env=env
    )
    installed = dict(line.split("==", 1) for line in frozen.stdout.splitlines() if "==" in line)
    expected = doctor.plugin_finding("classic", python, installed, data)
    classic = report["plugins"][0]
    assert (classic["verdict"], classic["reason"]) == (expected.verdict, expected.reason)
    assert classic["installed"]["gymnasium"] == "1.4.0"
    assert next(p for p in report["packages"] if p["name"] == "gymnasium")["version"] == "1.4.0"
    assert code == (0 if report["ok"] else 1)
    if classic["verdict"] != "verified":
        assert classic["fix"] and f"fix classic: {classic['fix']}" in shown

    install("-e", str(ROOT / "plugins" / "atari"), *(f"{name}=={version}" for name, version in ATARI_BAD.items()))
    code, report, shown = puffer_doctor()
    atari = next(p for p in report["plugins"] if p["name"] == "atari")
    assert code == 1 and (atari["verdict"], atari["reason"]) == ("known bad", rule["reason"])
    assert atari["installed"]["ale-py"] == ATARI_BAD["ale-py"]
    line = next(line for line in shown.splitlines() if "plugin atari" in line)
    assert line.startswith("✗") and rule["reason"] in line
