"""Plugins read from their source folders: axes, envs, and a broken one's error."""

from __future__ import annotations

import pathlib
import shutil

from puffer_core.matrix.sources import discover

ROOT = pathlib.Path(__file__).resolve().parents[2]

FIXTURE = ROOT / "tests" / "data" / "matrix_fixture_plugin"


def test_discover_reads_plugins_from_source(tmp_path):
    plugins = tmp_path / "plugins"
    shutil.copytree(FIXTURE, plugins / "fixture")
    broken = plugins / "broken"
    (broken / "puffer_plugin_broken").mkdir(parents=True)
    (broken / "pyproject.toml").write_text(
        '[project]\nname = "puffer-plugin-broken"\nversion = "1"\n'
        '[project.entry-points.puffer]\nbroken = "puffer_plugin_broken"\n'
    )
    (broken / "puffer_plugin_broken" / "__init__.py").write_text("raise RuntimeError('nope')\n")
    found = discover(plugins, include_builtins=False)
    assert found["fixture"].axes.package == "gymnasium"
    assert found["fixture"].distribution == "puffer-plugin-fixture"
    assert found["fixture"].envs == ["fixture/never", "fixture/cartpole"]
    assert found["broken"].axes is None and "nope" in found["broken"].error
    assert "classic" in discover(None)  # built-ins come with the core
