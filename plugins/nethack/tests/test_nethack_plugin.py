"""The plugin as Puffer Core sees it: hooks, listing, the missing-nle path, version dispatch."""

from __future__ import annotations

import importlib.metadata
import json

import puffer_plugin_nethack
import pytest
from puffer_plugin_nethack.envs import api_for_version, make_nethack
from puffer_plugin_nethack.wrappers import EndReason, NetHackWrapper, end_reason, find_nle

from puffer_core import CompatAxes, DockerLayer
from puffer_core.adapters import LegacyGymEnv
from puffer_core.testing import envs_json, load_plugins, run_puffer, run_python

IDS = {
    f"nethack/{task}"
    for task in ("nethack", "score", "staircase", "pet", "oracle", "gold", "eat", "scout", "challenge")
}


def test_plugin_loads_through_its_entry_point():
    plugins = load_plugins(environ={})
    info = plugins.plugins["nethack"]
    assert info.status == "loaded", info.error
    assert info.distribution == "puffer-plugin-nethack" and info.version == "0.1.0"
    assert set(info.hooks) == {"puffer_envs", "puffer_wrappers", "puffer_docker_layer", "puffer_compat_axes"}
    assert set(info.envs) == IDS
    assert plugins.docker_layers["nethack"].apt


def test_wrappers_hook_only_wraps_nethack_specs():
    plugins = load_plugins(environ={})
    assert NetHackWrapper in plugins.wrappers(plugins.get_spec("nethack/score"))
    assert NetHackWrapper not in plugins.wrappers(plugins.get_spec("classic/cartpole"))


def test_docker_layer_validates_and_holds_the_build_tools():
    layer = puffer_plugin_nethack.puffer_docker_layer()
    assert isinstance(layer, DockerLayer)
    layer.validate("nethack")
    assert {"cmake", "flex", "bison", "libbz2-dev", "build-essential"} <= set(layer.apt)


def test_compat_axes_validate_and_record_the_known_bad_cells():
    axes = puffer_plugin_nethack.puffer_compat_axes()
    assert isinstance(axes, CompatAxes)
    axes.validate("nethack")
    assert axes.package == "nle"
    assert axes.versions == ("0.9.1", "1.0.0", "1.1.0", "1.2.0", "1.3.0")
    assert axes.python == ("3.10", "3.11", "3.12", "3.13")
    assert axes.pins["1.3.0"] == {"gymnasium": "1.2.0"}
    assert axes.pins["1.0.0"]["gymnasium"] == "0.29.1"
    assert axes.pins["0.9.1"]["gym"] == "0.23.0"

    def bad(nle: str, python: str) -> bool:
        return any(kb.matches({"nle": nle, "python": python}) for kb in axes.known_bad)

    assert bad("1.0.0", "3.12") and bad("1.0.0", "3.13") and bad("1.1.0", "3.13") and bad("1.2.0", "3.13")
    assert not bad("1.0.0", "3.11") and not bad("1.2.0", "3.12")
    assert not any(bad("0.9.1", py) for py in axes.python)  # built from source on 3.10, 3.12, 3.13
    assert not any(bad("1.3.0", py) for py in axes.python)

    def bad_with(gymnasium: str) -> bool:
        pins = {"nle": "1.3.0", "gymnasium": gymnasium, "python": "3.11"}
        return any(kb.matches(pins) for kb in axes.known_bad)

    # A gymnasium discovery adds beside nle 1.3.0 is excluded with the pin as reason; its own is not.
    assert bad_with("1.4.0") and bad_with("1.2.3") and not bad_with("1.2.0")


def test_installed_nle_matches_a_compat_version():
    assert importlib.metadata.version("nle") in puffer_plugin_nethack.puffer_compat_axes().versions


# -- the API follows the installed nle ------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "api"),
    [
        ("0.9.1", "gym"),
        ("0.9.0", "gym"),
        ("0.7.3", "gym"),
        ("1.0.0", "gymnasium"),
        ("1.0.0rc1", "gymnasium"),
        ("1.3.0", "gymnasium"),
        (None, "gymnasium"),
        ("not-a-version", "gymnasium"),
    ],
)
def test_api_for_version(version, api):
    assert api_for_version(version) == api


def test_specs_declare_gym_api_under_nle_0_9(monkeypatch):
    monkeypatch.setattr(puffer_plugin_nethack, "installed_nle_version", lambda: "0.9.1")
    assert {spec.api for spec in puffer_plugin_nethack.env_specs()} == {"gym"}
    monkeypatch.setattr(puffer_plugin_nethack, "installed_nle_version", lambda: "1.3.0")
    assert {spec.api for spec in puffer_plugin_nethack.env_specs()} == {"gymnasium"}


def test_only_nle_0_9_needs_pkg_resources_and_says_which_setuptools_has_it(monkeypatch):
    """The plugin caps no setuptools (torch wants the newest): nle 0.9's envs ask for pkg_resources instead."""
    monkeypatch.setattr(puffer_plugin_nethack, "installed_nle_version", lambda: "0.9.1")
    for spec in puffer_plugin_nethack.env_specs():
        assert spec.requires == ("nle", "pkg_resources")
        assert spec.install_hint.startswith("pip install 'setuptools<81'")
    requires = importlib.metadata.requires("puffer-plugin-nethack") or []
    assert not [line for line in requires if line.startswith("setuptools")]


def test_specs_say_what_they_need():
    for spec in puffer_plugin_nethack.env_specs():
        assert spec.requires == ("nle",) and spec.install_hint == "pip install nle"
        assert spec.kwargs["observation_keys"] == ("glyphs", "blstats", "message")


def test_wrapper_finds_nle_through_the_gym_adapter():
    # The nle 0.9 path: the core's gym adapter sits between the raw env and our wrapper.
    raw = make_nethack("score", max_episode_steps=10)
    adapted = LegacyGymEnv(raw)
    wrapped = NetHackWrapper(adapted)
    assert find_nle(wrapped) is raw and wrapped.nle is raw
    obs, _ = wrapped.reset(seed=4)
    assert wrapped.last_seeds is not None and raw.get_seeds()[:2] == wrapped.last_seeds
    wrapped.close()
    with pytest.raises(TypeError, match="does not wrap an nle environment"):
        find_nle(object())


@pytest.mark.parametrize(
    ("status", "ascended", "steps", "limit", "reason"),
    [
        (1, False, 10, 5000, EndReason.DEATH),
        (2, False, 10, 5000, EndReason.TASK_SUCCESS),
        (1, True, 10, 5000, EndReason.ASCENDED),
        (-1, False, 5000, 5000, EndReason.TRUNCATED),
        (-1, False, 10, 5000, EndReason.ABORTED),  # challenge's no-progress abort
        (None, False, 10, None, EndReason.ABORTED),
    ],
)
def test_end_reason(status, ascended, steps, limit, reason):
    assert end_reason(status, ascended, steps, limit) is reason


# -- listing, in a subprocess ---------------------------------------------------------------


def test_puffer_envs_json_lists_the_ids():
    listing = envs_json("--plugin", "nethack")
    rows = {row["id"]: row for row in listing["envs"]}
    assert set(rows) == IDS
    api = api_for_version(importlib.metadata.version("nle"))
    assert all(row["available"] and row["api"] == api for row in rows.values())


def test_envs_listed_with_a_clear_message_when_nle_is_missing():
    listing = envs_json("--plugin", "nethack", block=("nle",))
    rows = {row["id"]: row for row in listing["envs"]}
    assert set(rows) == IDS
    for row in rows.values():
        assert row["available"] is False
        assert "pip install nle" in row["note"]


def test_making_an_env_without_nle_says_what_to_install():
    result = run_python(
        """
        import puffer_core
        from puffer_core.errors import MissingDependencyError
        try:
            puffer_core.make("nethack/score")
        except MissingDependencyError as exc:
            print("MISSING:", exc)
        """,
        block=("nle",),
    )
    assert result.returncode == 0, result.stderr
    assert "MISSING:" in result.stdout and "pip install nle" in result.stdout
    assert "nethack/score" in result.stdout


def test_plugin_import_does_not_import_nle():
    result = run_python(
        """
        import sys
        import puffer_plugin_nethack
        puffer_plugin_nethack.env_specs()
        print("nle" in sys.modules)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_nles_own_ids_are_this_plugins_envs():
    import gymnasium
    import nle  # noqa: F401  (registers NetHack's ids)

    plugins = load_plugins(environ={})
    for env_id in IDS:
        (alias,) = plugins.env_specs[env_id].aliases
        assert alias in gymnasium.envs.registry, alias  # a real id, nle's own
        assert plugins.get_spec(alias).id == env_id
    assert plugins.get_spec("NetHackScore-v0").id == "nethack/score"
    assert plugins.get_spec("NetHack-v0").id == "nethack/nethack"
    # With its wrappers: NetHackWrapper, not nle's bare env.
    assert NetHackWrapper in plugins.wrappers(plugins.get_spec("NetHackScore-v0"))


def test_running_an_nle_id_says_which_env_it_is_once():
    proc = run_puffer("run", "NetHackScore-v0", "--steps", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    note = "puffer: NetHackScore-v0 is nethack/score (nethack's env, with its wrappers and defaults)"
    assert proc.stderr.count(note) == 1, proc.stderr
    assert json.loads(proc.stdout)["env"] == "nethack/score"
