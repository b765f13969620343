"""The plugin as the core sees it: discovery, hook values, missing dependencies."""

from __future__ import annotations

import re
import sys

import pytest
from puffer_core import CompatAxes, DockerLayer, make_raw
from puffer_core.errors import MissingDependencyError
from puffer_core.testing import load_plugins

import puffer_plugin_pettingzoo as plugin

EXPECTED = {
    "pettingzoo/pistonball": "pettingzoo",
    "pettingzoo/knights_archers_zombies": "pettingzoo",
    "pettingzoo/cooperative_pong": "pettingzoo",
    "pettingzoo/connect_four": "pettingzoo-aec",
    "pettingzoo/tictactoe": "pettingzoo-aec",
    "pettingzoo/chess": "pettingzoo-aec",
    "pettingzoo/go": "pettingzoo-aec",
    "pettingzoo/leduc_holdem": "pettingzoo-aec",
    "pettingzoo/texas_holdem": "pettingzoo-aec",
    "pettingzoo/texas_holdem_no_limit": "pettingzoo-aec",
    "pettingzoo/hanabi": "pettingzoo-aec",
    "pettingzoo/rps": "pettingzoo",
}


def test_entry_point_loads_the_plugin_with_all_hooks_valid():
    plugins = load_plugins()
    info = plugins.plugins["pettingzoo"]
    assert info.status == "loaded", info.error
    assert info.distribution == "puffer-plugin-pettingzoo"
    assert set(info.hooks) == {"puffer_envs", "puffer_wrappers", "puffer_docker_layer", "puffer_compat_axes"}
    assert {env_id: plugins.env_specs[env_id].api for env_id in EXPECTED} == EXPECTED
    assert "pettingzoo" in plugins.docker_layers and "pettingzoo" in plugins.compat_axes


def test_ids_carry_no_version_suffix_and_specs_validate():
    for spec in plugin.puffer_envs():
        spec.validate("pettingzoo")
        assert not re.search(r"_v\d+$", spec.name), spec.id
        assert spec.requires[0] == "pettingzoo" and spec.install_hint.startswith("pip install")


def test_docker_layer_is_empty_and_valid():
    layer = plugin.puffer_docker_layer()
    assert isinstance(layer, DockerLayer)
    layer.validate("pettingzoo")
    assert layer == DockerLayer()


def test_compat_axes_are_valid_and_exclude_what_cannot_install():
    axes = plugin.puffer_compat_axes()
    assert isinstance(axes, CompatAxes)
    axes.validate("pettingzoo")
    assert axes.package == "pettingzoo" and "1.27.0" in axes.versions and "1.22.3" in axes.versions

    def bad(**pins):
        return " / ".join(known.reason for known in axes.known_bad if known.matches(pins))

    # release metadata: Requires-Python, Requires-Dist
    assert "gymnasium >= 1.0.0" in bad(pettingzoo="1.27.0", gymnasium="0.29.1", python="3.11")
    assert "Requires-Python < 3.12" in bad(pettingzoo="1.22.3", gymnasium="0.29.1", python="3.12")
    assert "Requires-Python < 3.13" in bad(pettingzoo="1.25.0", gymnasium="1.2.0", python="3.13")
    # builds that fail: hanabi on 3.11 (a wheel exists for 3.10), pygame 2.3.0 on 3.12+
    assert "hanabi" in bad(pettingzoo="1.23.1", gymnasium="1.2.0", python="3.11")
    assert not bad(pettingzoo="1.23.1", gymnasium="1.2.0", python="3.10")
    assert "pygame 2.3.0" in bad(pettingzoo="1.24.3", gymnasium="0.29.1", python="3.12")
    assert not bad(pettingzoo="1.24.3", gymnasium="0.29.1", python="3.11")
    assert not bad(pettingzoo="1.27.0", gymnasium="1.2.0", python="3.13")
    assert axes.pins["1.24.3"] == {"numpy": "2.2.6"} and "1.27.0" not in axes.pins


def test_missing_pettingzoo_lists_envs_and_make_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pettingzoo", None)  # find_spec -> None: "not installed"
    plugins = load_plugins()
    assert plugins.plugins["pettingzoo"].status == "loaded"
    assert set(EXPECTED) <= set(plugins.env_ids())
    with pytest.raises(MissingDependencyError, match=r"pettingzoo/pistonball needs .*pettingzoo\[butterfly\]"):
        make_raw("pettingzoo/pistonball", plugins=plugins)
    with pytest.raises(MissingDependencyError, match=r"pettingzoo\[classic\]"):
        make_raw("pettingzoo/connect_four", plugins=plugins)
