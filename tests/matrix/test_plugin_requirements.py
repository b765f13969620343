"""Each plugin's declared dependencies against the shipped constraint sets and beside torch: a
plugin that caps a package the sets leave open (nethack's old setuptools<81) fights whatever
else installs it (torch requires setuptools>=77.0.3, and pip installs the newest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from puffer_core.matrix.pyproject import read_pyproject
from puffer_core.matrix.shipped import SHIPPED_DIR, shipped_pythons

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = sorted(path.parent.name for path in ROOT.glob("plugins/*/pyproject.toml"))
#: Our own distributions: the sets pin what the checkout holds, a plugin's range names the core it is written for.
OURS = {"puffer-core"} | {f"puffer-plugin-{name}" for name in PLUGINS}


def requirements(plugin: str) -> list[Requirement]:
    data = read_pyproject(ROOT / "plugins" / plugin / "pyproject.toml")
    return [Requirement(line) for line in data["project"]["dependencies"]]


def pinned(python: str) -> dict[str, str]:
    text = (SHIPPED_DIR / f"constraints-py{python}.txt").read_text()
    pairs = (line.split("==", 1) for line in text.splitlines() if "==" in line and not line.startswith("#"))
    return {canonicalize_name(name): version for name, version in pairs}


def applies(requirement: Requirement, python: str) -> bool:
    return requirement.marker is None or requirement.marker.evaluate({"python_version": python, "extra": ""})


def caps(requirement: Requirement) -> bool:
    """Whether the requirement excludes every release above some version."""
    return any(spec.operator in ("<", "<=", "==", "===", "~=") for spec in requirement.specifier)


def test_the_plugins_are_found():
    assert {"atari", "dmlab", "nethack", "pettingzoo"} <= set(PLUGINS)


@pytest.mark.parametrize("plugin", PLUGINS)
def test_every_pinned_dependency_is_within_each_shipped_set(plugin):
    pythons = shipped_pythons()
    assert pythons, "no constraint set ships"
    for python in pythons:
        pins = pinned(python)
        for requirement in requirements(plugin):
            name = canonicalize_name(requirement.name)
            if name in pins and applies(requirement, python):
                assert requirement.specifier.contains(pins[name], prereleases=True), (
                    f"{plugin} requires {requirement}, constraints-py{python}.txt pins {name}=={pins[name]}"
                )


@pytest.mark.parametrize("plugin", PLUGINS)
def test_no_plugin_caps_a_package_the_sets_leave_open(plugin):
    open_names = set()
    for python in shipped_pythons():
        pins = pinned(python)
        open_names |= {
            str(r) for r in requirements(plugin) if applies(r, python) and canonicalize_name(r.name) not in pins
        }
    capped = sorted(
        line for line in open_names if caps(Requirement(line)) and canonicalize_name(Requirement(line).name) not in OURS
    )
    assert not capped, (
        f"{plugin} caps {', '.join(capped)}, which no constraint set pins: whatever else installs it "
        "(torch: setuptools>=77.0.3) gets the newest and pip reports a conflict; check it at run time instead"
    )


def test_pip_check_finds_no_conflict_of_an_installed_puffer_distribution():
    """In this environment (tests_torch: torch, which brings the newest setuptools, beside every plugin)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    ours = [line for line in proc.stdout.splitlines() if canonicalize_name(line.split(" ", 1)[0]) in OURS]
    assert not ours, "\n".join(ours)
