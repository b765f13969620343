"""A plugin's CompatAxes reach `uv pip install` command lines: anything but names, versions and
index requirements is refused when the plugin loads, naming the plugin and the field, and only
that plugin is unavailable."""

from __future__ import annotations

import json
import sys

import pytest
from plugin_site import GOOD, run_puffer, site_entry_points, write_plugin

from puffer_core.matrix.sources import discover
from puffer_core.plugins import FAILED, LOADED, load_plugins

OPTION = "--index-url=http://127.0.0.1:9/"

# A plugin with one env and the axes given (Python source of CompatAxes keyword arguments).
PLUGIN = """
import puffer_core
from puffer_core import CompatAxes, EnvSpec, KnownBad

def _make(**kwargs):
    import gymnasium
    return gymnasium.make("CartPole-v1", **kwargs)

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("{name}/cartpole", _make)]

@puffer_core.hookimpl
def puffer_compat_axes():
    return CompatAxes({axes})
"""

BASE = 'package="gymnasium", versions=("1.2.0",), python=("3.11",)'

BAD_AXES = [
    pytest.param(f"{BASE}, extras=({OPTION!r},)", "extras", "option", id="extras-option"),
    pytest.param(f"{BASE}, extras=('-r/etc/passwd',)", "extras", "option", id="extras-short-option"),
    pytest.param(f"{BASE}, extras=('six @ http://127.0.0.1:9/six.whl',)", "extras", "URL", id="extras-url"),
    pytest.param(f"{BASE}, extras=('./evil.whl',)", "extras", "PEP 508", id="extras-path"),
    pytest.param(f"{BASE}, extras=('six\\n--pre',)", "extras", "line break", id="extras-two-lines"),
    pytest.param(f'package={OPTION!r}, versions=("1.2.0",)', "package", "package name", id="package-option"),
    pytest.param('package="gymnasium>=1", versions=("1.2.0",)', "package", "package name", id="package-specifier"),
    pytest.param(
        f'{BASE}, pins={{"1.2.0": {{{OPTION!r}: "1.0"}}}}', "pins[1.2.0]", "package name", id="pin-name-option"
    ),
    pytest.param(
        f'{BASE}, pins={{"1.2.0": {{"six": "1.17.0\\n"}}}}', "pins[1.2.0][six]", "no spaces", id="pin-version-newline"
    ),
    pytest.param(f'{BASE}, axes={{"--pre": ("1.0",)}}', "axes", "package name", id="axis-name"),
    pytest.param(
        f'{BASE}, known_bad=(KnownBad({{"-e.": "<1"}}, "r"),)', "known_bad", "package name", id="known-bad-name"
    ),
    pytest.param(
        f'{BASE}, known_bad=(KnownBad({{"gymnasium": "<1"}}, "one\\ntwo"),)', "known_bad", "line", id="known-bad-reason"
    ),
    pytest.param('package="gymnasium", versions=("1.2.0",), python=("3.11\\n",)', "python", "3.11", id="python"),
]


@pytest.mark.parametrize(("axes", "field", "fragment"), BAD_AXES)
def test_bad_axes_fail_the_plugin_at_load_naming_plugin_and_field(site, axes, field, fragment):
    write_plugin(site, "sneaky", PLUGIN.format(name="sneaky", axes=axes))
    write_plugin(site, "good", GOOD)
    plugins = load_plugins(entry_points=site_entry_points(site), environ={})
    info = plugins.plugins["sneaky"]
    assert info.status == FAILED
    assert f"plugin 'sneaky': CompatAxes field '{field}'" in info.error
    assert fragment in info.error
    # Only that plugin is unavailable: no axes, no envs; the good plugin is untouched.
    assert "sneaky" not in plugins.compat_axes and "sneaky/cartpole" not in plugins.env_specs
    assert plugins.plugins["good"].status == LOADED and "good" in plugins.compat_axes


@pytest.mark.parametrize(
    "axes",
    [
        f'{BASE}, extras=("pettingzoo[butterfly]>=1.24; python_version < \\"3.13\\"", "opencv-python-headless")',
        f'{BASE}, pins={{"1.2.0": {{"Six": "1.17.0", "zope.interface": "7.0.post1"}}}}',
        f'{BASE}, known_bad=(KnownBad({{"Python": ">=3.13", "ale-py": "<0.10"}}, "no wheel"),)',
    ],
)
def test_ordinary_axes_load(site, axes):
    write_plugin(site, "fine", PLUGIN.format(name="fine", axes=axes))
    plugins = load_plugins(entry_points=site_entry_points(site), environ={})
    assert plugins.plugins["fine"].status == LOADED, plugins.plugins["fine"].error


def test_puffer_plugins_reports_the_refused_plugin(site):
    write_plugin(site, "sneaky", PLUGIN.format(name="sneaky", axes=f"{BASE}, extras=({OPTION!r},)"))
    proc = run_puffer(site, "plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {entry["name"]: entry for entry in json.loads(proc.stdout)["plugins"]}
    assert listed["sneaky"]["status"] == "failed"
    assert "plugin 'sneaky': CompatAxes field 'extras'" in listed["sneaky"]["error"]
    assert OPTION in listed["sneaky"]["error"]


def test_the_matrix_gives_a_refused_plugin_no_cells(tmp_path):
    folder = tmp_path / "plugins" / "sneaky"
    (folder / "puffer_plugin_sneaky").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "puffer-plugin-sneaky"\nversion = "1"\n'
        '[project.entry-points.puffer]\nsneaky = "puffer_plugin_sneaky"\n'
    )
    source = PLUGIN.format(name="sneaky", axes=f"{BASE}, extras=({OPTION!r},)")
    (folder / "puffer_plugin_sneaky" / "__init__.py").write_text(source)
    try:
        found = discover(tmp_path / "plugins", include_builtins=False)
    finally:
        sys.modules.pop("puffer_plugin_sneaky", None)
    assert found["sneaky"].axes is None
    assert "CompatAxes field 'extras'" in found["sneaky"].error and OPTION in found["sneaky"].error
