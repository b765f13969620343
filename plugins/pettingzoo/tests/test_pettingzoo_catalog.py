"""The env catalogue: discovery without importing pettingzoo, and the creators."""

from __future__ import annotations

import subprocess
import sys

import pytest

from puffer_plugin_pettingzoo import envs as catalog


def _touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def test_scan_keeps_the_highest_version_and_ignores_other_files(tmp_path):
    for name in ("pistonball_v5.py", "pistonball_v6.py", "pistonball_v10.py", "all_modules.py", "__init__.py"):
        _touch(tmp_path / "butterfly" / name)
    _touch(tmp_path / "classic" / "texas_holdem_no_limit_v6.py")
    _touch(tmp_path / "sisl" / "pursuit_v4.py")  # a family this plugin does not expose

    found = catalog.scan_modules([str(tmp_path)])

    assert found == {
        ("butterfly", "pistonball"): "pettingzoo.butterfly.pistonball_v10",
        ("classic", "texas_holdem_no_limit"): "pettingzoo.classic.texas_holdem_no_limit_v6",
    }


def test_installed_release_provides_every_known_env():
    found = catalog.installed_modules()
    for name, entry in catalog.KNOWN.items():
        if name == "hanabi" and ("classic", "hanabi") not in found:
            continue  # older releases ship Hanabi under another backend; 1.27 does ship it
        assert (entry.family, name) in found, f"pettingzoo has no {entry.family}/{name}_v*"
    assert found[("butterfly", "pistonball")].startswith("pettingzoo.butterfly.pistonball_v")


def test_catalog_adds_unknown_envs_of_the_installed_release(monkeypatch):
    monkeypatch.setattr(
        catalog,
        "installed_modules",
        lambda: {("classic", "gin_rummy"): "pettingzoo.classic.gin_rummy_v4", ("butterfly", "prison"): "x"},
    )
    entries = {entry.name: entry for entry in catalog.all_entries()}
    assert set(catalog.KNOWN) < set(entries)
    assert entries["gin_rummy"].api == "pettingzoo-aec"
    assert entries["prison"].api == "pettingzoo"


def test_listing_does_not_import_pettingzoo():
    code = (
        "import sys; from puffer_plugin_pettingzoo import puffer_envs; specs = puffer_envs(); "
        "assert len(specs) >= 12; "
        "assert 'pettingzoo' not in sys.modules and 'pygame' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_creator_builds_parallel_or_aec_as_declared():
    parallel = catalog.make_env("butterfly", "knights_archers_zombies", True)
    aec = catalog.make_env("classic", "connect_four", False)
    try:
        assert not hasattr(parallel, "agent_iter") and len(parallel.possible_agents) == 4
        assert hasattr(aec, "agent_iter") and aec.possible_agents == ["player_0", "player_1"]
    finally:
        parallel.close()
        aec.close()


def test_creator_passes_kwargs_to_pettingzoo():
    env = catalog.make_env("butterfly", "pistonball", True, n_pistons=4)
    assert len(env.possible_agents) == 4
    env.close()


def test_creator_names_an_env_the_installed_release_lacks():
    from puffer_core.errors import PluginError

    with pytest.raises(PluginError, match=r"has no classic/nonexistent_game_v\*"):
        catalog.make_env("classic", "nonexistent_game", False)
