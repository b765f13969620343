"""puffer_core.matrix.doctor: installations (name -> version mappings) judged against matrix results
built here, and against the verified.json shipped in puffer-core."""

from __future__ import annotations

import platform

import pytest

import puffer_core
from puffer_core.matrix import doctor
from puffer_core.matrix.doctor import IN_TANK, KNOWN_BAD, NOT_INSTALLED, NOT_USED, NOT_VERIFIED, VERIFIED
from puffer_core.matrix.shipped import load_verified

PY = "3.11"


def cell(plugin, pins, outcome="pass", python=PY, resolved=None, reason=None):
    name = "-".join(f"{k}{v}" for k, v in pins.items())
    base = {"puffer-core": "0.1.0", "numpy": "2.4.6", **pins}
    return {
        "id": f"{plugin}-{name}-py{python}",
        "plugin": plugin,
        "python": python,
        "pins": pins,
        "resolved": base if resolved is None else resolved,
        "outcome": outcome,
        "reason": reason,
    }


def matrix(cells, known_bad=(), commons=None):
    """A verified.json's content: plugins nethack (nle) and classic (built-in, gymnasium)."""
    return {
        "schema": 1,
        "default_python": PY,
        "plugins": {
            "nethack": {"distribution": "puffer-plugin-nethack", "package": "nle", "known_bad": list(known_bad)},
            "classic": {"distribution": None, "package": "gymnasium", "known_bad": []},
            "dmlab": {"distribution": "puffer-plugin-dmlab", "package": "deepmind-lab", "tank_only": True},
        },
        "cells": cells,
        "commons": commons if commons is not None else {},
    }


CELLS = [
    cell("nethack", {"nle": "1.3.0", "gymnasium": "1.2.0"}),
    cell("nethack", {"nle": "1.2.0", "gymnasium": "1.0.0"}),
    cell("nethack", {"nle": "0.9.1", "gym": "0.23.0", "setuptools": "80.10.2"}),
    cell("nethack", {"nle": "1.1.0", "gymnasium": "1.0.0"}, outcome="smoke-failed", reason="segfault in reset"),
    cell("nethack", {"nle": "1.0.0", "gymnasium": "0.29.1"}, outcome="excluded", reason="no wheel"),
    cell("classic", {"gymnasium": "1.2.0"}),
    cell("classic", {"gymnasium": "1.0.0"}),
    cell("dmlab", {"deepmind-lab": "1.0"}),
]
COMMON = {
    PY: {
        "outcome": "pass",
        "members": {"nethack": {"nle": "1.3.0", "gymnasium": "1.2.0"}},
        "dropped": {"dmlab": "its package is on no index"},
        "pinned": {"gymnasium": "1.2.0", "nle": "1.3.0", "numpy": "2.4.6", "puffer-plugin-nethack": "0.1.0"},
    }
}
GOOD = {"puffer-plugin-nethack": "0.1.0", "nle": "1.3.0", "gymnasium": "1.2.0", "numpy": "2.4.6"}


def test_the_common_set_installed_is_verified_throughout():
    report = doctor.diagnose(PY, GOOD, matrix(CELLS, commons=COMMON), "0.1.0")
    assert report.ok
    by_name = {f.name: f for f in report.plugins}
    assert set(by_name) == {"nethack", "classic"}  # classic: by its package, it has no distribution
    assert (
        by_name["nethack"].verdict == VERIFIED and by_name["nethack"].cell == "nethack-nle1.3.0-gymnasium1.2.0-py3.11"
    )
    assert by_name["nethack"].pins == {"nle": "1.3.0", "gymnasium": "1.2.0"} and by_name["nethack"].fix is None
    assert report.python.verdict == VERIFIED and report.core.verdict == VERIFIED
    packages = {f.name: f.verdict for f in report.packages}
    assert packages["nle"] == packages["gymnasium"] == packages["numpy"] == VERIFIED
    assert packages["gym"] == packages["shimmy"] == packages["setuptools"] == NOT_INSTALLED
    assert report.to_json()["ok"] is True


def test_versions_compare_as_releases_and_names_canonically():
    installed = {"Puffer_Plugin.Nethack": "0.1.0", "NLE": "1.3", "Gymnasium": "1.2.0", "numpy": "2.4.6"}
    finding = doctor.plugin_finding("nethack", PY, installed, matrix(CELLS))
    assert finding.verdict == VERIFIED


def test_a_pinned_companion_not_installed_does_not_match():
    installed = {"puffer-plugin-nethack": "0.1.0", "nle": "0.9.1", "setuptools": "80.10.2"}  # no gym
    finding = doctor.plugin_finding("nethack", PY, installed, matrix(CELLS, commons=COMMON))
    assert finding.verdict == NOT_VERIFIED
    assert "nle 0.9.1, gym (not installed), setuptools 80.10.2" in finding.reason


def test_not_verified_names_the_common_set_and_the_command_that_installs_it():
    installed = {**GOOD, "gymnasium": "1.4.0"}
    report = doctor.diagnose(PY, installed, matrix(CELLS, commons=COMMON), "0.1.0")
    nethack = next(f for f in report.plugins if f.name == "nethack")
    assert nethack.verdict == NOT_VERIFIED and not report.ok
    assert "no cell on Python 3.11 ran nle 1.3.0, gymnasium 1.4.0" in nethack.reason
    assert nethack.nearest == {"nle": "1.3.0", "gymnasium": "1.2.0"}
    assert nethack.fix == "pip install -c <(puffer constraints) nle gymnasium"
    classic = next(f for f in report.plugins if f.name == "classic")
    # Not a member of the common set: its newest passing cell, with a pinned install.
    assert classic.verdict == NOT_VERIFIED and classic.nearest == {"gymnasium": "1.2.0"}
    assert classic.fix == "pip install 'gymnasium==1.2.0'"
    gymnasium = next(f for f in report.packages if f.name == "gymnasium")
    assert gymnasium.verdict == NOT_VERIFIED and gymnasium.fix == "pip install -c <(puffer constraints) gymnasium"
    assert "verified: 1.0.0, 1.2.0" in gymnasium.reason


def test_not_verified_without_any_passing_cell_says_so():
    data = matrix([cell("nethack", {"nle": "1.3.0"}, outcome="install-failed", reason="no wheel")])
    finding = doctor.plugin_finding("nethack", PY, {"puffer-plugin-nethack": "0.1.0", "nle": "1.4.0"}, data)
    assert finding.verdict == NOT_VERIFIED and finding.fix is None
    assert "the matrix verified no set of nethack on Python 3.11" in finding.reason
    missing = doctor.plugin_finding("nethack", PY, {"puffer-plugin-nethack": "0.1.0"}, matrix(CELLS, commons=COMMON))
    assert missing.verdict == NOT_VERIFIED and missing.reason.startswith("its package nle is not installed")
    assert missing.fix == "pip install -c <(puffer constraints) nle gymnasium"


def test_known_bad_by_rule_names_the_reason():
    rules = [
        {"when": {"nle": "<1.3", "python": ">=3.12"}, "reason": "no wheel for 3.12"},
        {"when": {"nle": ">=1.3", "gymnasium": ">=1.3"}, "reason": "nle 1.3 breaks on gymnasium 1.3"},
        {"when": {"nle": ">=1.3", "gym": ">=0"}, "reason": "only when gym is installed"},
    ]
    data = matrix(CELLS, known_bad=rules, commons=COMMON)
    bad = doctor.plugin_finding("nethack", PY, {**GOOD, "gymnasium": "1.4.0"}, data)
    assert bad.verdict == KNOWN_BAD and bad.reason == "nle 1.3 breaks on gymnasium 1.3"
    assert bad.fix == "pip install -c <(puffer constraints) nle gymnasium"
    old = doctor.plugin_finding("nethack", "3.12", {**GOOD, "nle": "1.2.0"}, data)
    assert old.verdict == KNOWN_BAD and old.reason == "no wheel for 3.12"
    # A rule naming a package not installed (gym) does not match; nor one for another Python.
    assert doctor.plugin_finding("nethack", PY, GOOD, data).verdict == VERIFIED
    assert (
        doctor.plugin_finding("nethack", PY, {**GOOD, "nle": "1.2.0", "gymnasium": "1.0.0"}, data).verdict == VERIFIED
    )


def test_known_bad_by_a_failing_cell_but_not_by_an_excluded_one():
    data = matrix(CELLS, commons=COMMON)
    failed = doctor.plugin_finding("nethack", PY, {**GOOD, "nle": "1.1.0", "gymnasium": "1.0.0"}, data)
    assert failed.verdict == KNOWN_BAD and failed.cell == "nethack-nle1.1.0-gymnasium1.0.0-py3.11"
    assert failed.reason == "cell nethack-nle1.1.0-gymnasium1.0.0-py3.11: smoke-failed: segfault in reset"
    # Excluded cells never ran: their rule (none here) speaks for them.
    excluded = doctor.plugin_finding("nethack", PY, {**GOOD, "nle": "1.0.0", "gymnasium": "0.29.1"}, data)
    assert excluded.verdict == NOT_VERIFIED
    # The same pins on another Python are a different question.
    assert doctor.plugin_finding("nethack", "3.12", {**GOOD, "nle": "1.1.0", "gymnasium": "1.0.0"}, data).verdict == (
        NOT_VERIFIED
    )


@pytest.mark.parametrize("outcome", ["tank-missing", "interpreter-missing"])
def test_a_cell_that_never_ran_its_combination_judges_nothing(outcome):
    """A tank-only cell without an image, or a Python uv did not find: not verified, never known bad."""
    data = matrix([*CELLS, cell("nethack", {"nle": "1.4.0", "gymnasium": "1.2.0"}, outcome=outcome)], commons=COMMON)
    finding = doctor.plugin_finding("nethack", PY, {**GOOD, "nle": "1.4.0"}, data)
    assert finding.verdict == NOT_VERIFIED and "no cell on Python 3.11 ran" in finding.reason
    assert doctor.known_bad_warning("nethack", PY, {**GOOD, "nle": "1.4.0"}, data) is None


def test_an_unknown_python_is_not_verified_and_the_nearest_one_is_named():
    data = matrix(CELLS, commons={**COMMON, "3.13": {"outcome": "pass", "members": {}, "dropped": {}}})
    report = doctor.diagnose("3.14", GOOD, data, "0.1.0")
    assert report.python.verdict == NOT_VERIFIED and not report.ok
    assert report.python.reason == "the matrix ran nothing on Python 3.14; verified on 3.11, 3.13"
    assert report.python.fix == "use Python 3.13 (e.g. uv venv --python 3.13)"
    assert {f.verdict for f in report.plugins} == {NOT_VERIFIED}
    ran = doctor.python_finding(PY, matrix(CELLS, commons={PY: {"outcome": "smoke-failed"}}))
    assert ran.verdict == NOT_VERIFIED and "its joint cell: smoke-failed" in ran.reason


def test_packages_are_judged_only_where_they_matter():
    installed = {**GOOD, "setuptools": "65.5.0", "numpy": "2.5.0", "shimmy": "2.0.1"}
    report = doctor.diagnose(PY, installed, matrix(CELLS, commons=COMMON), "0.1.0")
    packages = {f.name: f for f in report.packages}
    # setuptools: only nle 0.9.1's cell pins it, and nle 1.3.0 is installed.
    assert packages["setuptools"].verdict == NOT_USED
    assert packages["shimmy"].verdict == NOT_USED  # an axis package no cell here uses
    assert packages["numpy"].verdict == NOT_VERIFIED  # puffer-core's own dependency: always judged
    assert packages["numpy"].nearest == {"numpy": "2.4.6"}
    assert not report.ok and all(f.verdict == VERIFIED for f in report.plugins)
    # Installed with nle 0.9.1, setuptools matters.
    old = {**GOOD, "nle": "0.9.1", "gym": "0.23.0", "setuptools": "65.5.0"}
    packages = {f.name: f for f in doctor.diagnose(PY, old, matrix(CELLS, commons=COMMON), "0.1.0").packages}
    assert packages["setuptools"].verdict == NOT_VERIFIED
    # The common set pins no setuptools: `pip install -c <(puffer constraints) setuptools` would move nothing.
    assert packages["setuptools"].fix == "pip install 'setuptools==80.10.2'"


def test_a_tank_only_plugin_without_its_package_is_in_pufferTank_and_fails_nothing():
    installed = {**GOOD, "puffer-plugin-dmlab": "0.1.0"}
    report = doctor.diagnose(PY, installed, matrix(CELLS, commons=COMMON), "0.1.0")
    dmlab = next(f for f in report.plugins if f.name == "dmlab")
    assert dmlab.verdict == IN_TANK and dmlab.fix is None and not dmlab.fails
    assert dmlab.reason.startswith("deepmind-lab is on no package index: only PufferTank's image has it")
    assert next(f for f in report.packages if f.name == "deepmind-lab").verdict == IN_TANK
    assert report.ok
    # Inside PufferTank the package is there, and judged as any other.
    inside = doctor.plugin_finding("dmlab", PY, {**installed, "deepmind-lab": "1.0"}, matrix(CELLS, commons=COMMON))
    assert inside.verdict == VERIFIED


def test_no_fix_names_a_plugin_distribution():
    """The plugins' distributions are on no index yet: a fix moves the packages they run."""
    data = matrix(CELLS, commons=COMMON)
    for installed in ({**GOOD, "gymnasium": "1.4.0"}, {**GOOD, "nle": "1.2.0"}, {"puffer-plugin-nethack": "0.1.0"}):
        for finding in doctor.diagnose(PY, installed, data, "0.1.0").findings:
            assert "puffer-plugin" not in (finding.fix or ""), finding
    old = doctor.plugin_finding("nethack", "3.12", {**GOOD, "nle": "0.9.1"}, {**data, "commons": {}})
    assert old.fix is None or "puffer-plugin" not in old.fix


def test_puffer_core_and_plugins_the_matrix_does_not_know_are_not_verified():
    report = doctor.diagnose(PY, GOOD, matrix(CELLS, commons=COMMON), "0.2.0", loaded=["nethack", "mine"])
    assert report.core.verdict == NOT_VERIFIED and "(the matrix ran: 0.1.0)" in report.core.reason
    mine = next(f for f in report.plugins if f.name == "mine")
    assert mine.verdict == NOT_VERIFIED and mine.reason == "the matrix has no cells for plugin mine"
    assert [f.name for f in report.plugins] == ["classic", "mine", "nethack"]


def test_the_warning_is_one_line_for_known_bad_only():
    rules = [{"when": {"gymnasium": ">=1.3"}, "reason": "gymnasium 1.3 renamed the wrapper"}]
    data = matrix(CELLS, known_bad=rules, commons=COMMON)
    line = doctor.known_bad_warning("nethack", PY, {**GOOD, "gymnasium": "1.4.0"}, data)
    assert line is not None and "\n" not in line
    assert line.startswith("nethack as installed (nle 1.3.0, gymnasium 1.4.0, Python 3.11) is known bad: gymnasium 1.3")
    assert doctor.known_bad_warning("nethack", PY, GOOD, data) is None  # verified
    assert doctor.known_bad_warning("nethack", PY, {**GOOD, "nle": "1.4.0"}, data) is None  # not verified
    assert doctor.known_bad_warning("unknown", PY, GOOD, data) is None
    assert doctor.needed_names("nethack", data) == {"puffer-plugin-nethack", "nle", "gymnasium", "gym", "setuptools"}


def test_json_report_keeps_its_shape():
    report = doctor.diagnose(PY, {**GOOD, "gymnasium": "1.4.0"}, matrix(CELLS, commons=COMMON), "0.1.0")
    data = report.to_json()
    assert list(data) == ["schema", "ok", "python", "puffer_core", "plugins", "packages"]
    keys = ["name", "version", "verdict", "reason", "fix", "cell", "nearest", "installed"]
    for entry in [data["python"], data["puffer_core"], *data["plugins"], *data["packages"]]:
        assert list(entry) == keys
        assert entry["verdict"] in (VERIFIED, NOT_VERIFIED, KNOWN_BAD, NOT_INSTALLED, NOT_USED, IN_TANK)


# The verified.json shipped in puffer-core (its content changes with each matrix run).


def test_this_installation_gets_a_verdict_on_everything_the_shipped_matrix_knows():
    data = load_verified()
    python = ".".join(platform.python_version_tuple()[:2])
    installed = doctor.installed_versions()
    report = doctor.diagnose(python, installed, data, puffer_core.__version__)
    judged = {VERIFIED, NOT_VERIFIED, KNOWN_BAD}
    assert report.python.verdict in judged and report.core.verdict in judged
    assert {f.name for f in report.plugins} == set(doctor.plugin_names(data, installed)) >= {"classic"}
    assert all(f.verdict in judged | {IN_TANK} and f.reason for f in report.plugins)
    tank_only = {name for name, info in data["plugins"].items() if info["tank_only"]}
    assert tank_only == {"dmlab"}  # DeepMind Lab: on no index, built by PufferTank
    assert all(f.verdict != IN_TANK or f.name in tank_only for f in report.plugins)
    assert {f.name for f in report.packages} >= set(doctor.AXIS_PACKAGES)
    for finding in report.packages:
        assert (finding.version is None) == (finding.verdict in (NOT_INSTALLED, IN_TANK))
    assert report.ok == (not any(f.fails for f in report.findings))


def _as_installed(info, pins):
    return {**({info["distribution"]: "0.1.0"} if info["distribution"] else {}), **pins}


def test_each_shipped_common_set_installed_is_verified():
    data = load_verified()
    sets = [(python, section) for python, section in data["commons"].items() if section["outcome"] == "pass"]
    assert sets, "the shipped matrix verified no common set"
    for python, section in sets:
        installed = {}
        for plugin, pins in section["members"].items():
            installed.update(_as_installed(data["plugins"][plugin], pins))
        for plugin in section["members"]:
            finding = doctor.plugin_finding(plugin, python, installed, data)
            assert finding.verdict == VERIFIED, (python, finding)
        assert doctor.python_finding(python, data).verdict == VERIFIED


def test_a_real_passing_cell_installed_is_verified_and_a_real_excluded_one_known_bad():
    data = load_verified()
    passing = [c for c in data["cells"] if c["outcome"] == "pass"]
    assert passing
    for record in passing:
        installed = {**record["resolved"], **_as_installed(data["plugins"][record["plugin"]], record["pins"])}
        finding = doctor.plugin_finding(record["plugin"], record["python"], installed, data)
        assert finding.verdict == VERIFIED, (record["id"], finding)
    for record in data["cells"]:
        info = data["plugins"][record["plugin"]]
        rules = {rule["reason"] for rule in info["known_bad"]}
        if record["outcome"] != "excluded" or record["reason"] not in rules:
            continue
        finding = doctor.plugin_finding(record["plugin"], record["python"], _as_installed(info, record["pins"]), data)
        assert finding.verdict == KNOWN_BAD and finding.reason in rules, (record["id"], finding)


@pytest.mark.parametrize("python", ["2.7", "3.99"])
def test_a_python_the_shipped_matrix_never_ran_is_not_verified(python):
    assert doctor.python_finding(python, load_verified()).verdict == NOT_VERIFIED


def test_the_cell_cited_as_why_has_the_installed_versions_or_is_called_the_nearest():
    """puffer-core and gymnasium were verified by cells of other versions (dmlab's, where deepmind-lab is not
    installed; nle 1.2's, where nle 1.3 is): the doctor cites a cell that passed with what is installed."""
    installed = {"puffer-core": "0.1.0", "numpy": "2.4.6", "nle": "1.3.0", "gymnasium": "1.2.0"}
    report = doctor.diagnose(PY, installed, matrix(CELLS, commons=COMMON), "0.1.0")
    core = report.core
    assert core.verdict == VERIFIED and core.cell == "nethack-nle1.3.0-gymnasium1.2.0-py3.11", core
    assert core.reason.endswith("passed with it and the versions installed here")
    for finding in (*report.packages, core):
        if finding.verdict == VERIFIED:  # every cell cited names this installation's versions, or says it does not
            cited = next(c for c in CELLS if c["id"] == finding.cell)
            exact = all(doctor._same(installed.get(name), version) for name, version in cited["pins"].items())
            assert exact == ("nearest" not in finding.reason), finding
    # Where no passing cell had these versions, the one cited is the nearest, with what differs.
    other = {**installed, "nle": "1.1.5", "gymnasium": "1.1.1"}
    core = doctor.diagnose(PY, other, matrix(CELLS, commons=COMMON), "0.1.0").core
    assert core.verdict == VERIFIED and "passed with it (nearest: it had gymnasium 1.2.0 (1.1.1 here))" in core.reason
