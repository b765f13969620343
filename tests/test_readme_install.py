"""README's first command, as written, on the Python running the tests (`nox -s tests` runs it on
3.10 and 3.13, `tests_torch` on 3.11): a fresh venv, a copy of the checkout, bash; then
`puffer doctor` in that venv exits 0."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_dist import fresh_env

ROOT = Path(__file__).resolve().parents[1]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def first_command() -> str:
    """The first line of the first ```bash block under README's "Start here"."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Start here") :]
    block = re.search(r"^```bash\n(.+?)\n```", section, re.MULTILINE | re.DOTALL)
    assert block, "README's Start here has no bash block"
    return block.group(1).splitlines()[0]


def checkout_copy(dest: Path) -> None:
    """The files git tracks, as they are on disk: the clean clone a new user has."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in listed.decode().split("\0")[:-1]:
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def test_the_first_command_reads_the_set_of_the_running_python():
    command = first_command()
    assert "puffer_core/matrix/verified/constraints-py$(python -c" in command
    assert command.endswith("&& puffer run classic/cartpole")


@pytest.mark.slow
def test_the_readmes_first_command_works_on_this_python(tmp_path):
    uv = shutil.which("uv") or pytest.fail("uv is part of the dev extra")
    checkout, venv = tmp_path / "checkout", tmp_path / "venv"
    checkout_copy(checkout)
    env = fresh_env()
    subprocess.run([uv, "venv", "-q", "--seed", "--python", PYTHON, str(venv)], check=True, env=env, timeout=300)
    env.update(PATH=f"{venv / 'bin'}:{env['PATH']}", VIRTUAL_ENV=str(venv))  # as after `source venv/bin/activate`
    proc = subprocess.run(
        ["bash", "-c", first_command()], cwd=checkout, env=env, capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "steps/s" in proc.stdout + proc.stderr
    constraints = (ROOT / "puffer_core/matrix/verified" / f"constraints-py{PYTHON}.txt").read_text()
    pinned = dict(line.split("==") for line in constraints.splitlines() if "==" in line and not line.startswith("#"))
    freeze = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True)
    installed = dict(line.split("==") for line in freeze.stdout.splitlines() if "==" in line)
    assert {"gymnasium", "nle", "numpy"} <= {name.lower() for name in installed}
    for name, version in installed.items():
        assert pinned.get(name.lower(), version) == version, name
    # Then `puffer doctor` passes: DeepMind Lab's plugin is installed, its engine is PufferTank's.
    doctor = subprocess.run(["puffer", "doctor"], cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.splitlines()[-1] == "everything installed is verified"
    dmlab = next(line for line in doctor.stdout.splitlines() if "plugin dmlab" in line)
    assert "in PufferTank" in dmlab and "on no package index" in dmlab
    assert not [line for line in doctor.stdout.splitlines() if line.startswith("fix ")]
