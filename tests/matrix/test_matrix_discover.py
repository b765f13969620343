"""`puffer matrix discover`: a real folder index and a real test plugin; discovered.json and the cells it adds."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
from click.testing import CliRunner
from local_index import build_wheel, closed_port, write_project_page

from puffer_core.cli.matrix import matrix
from puffer_core.matrix.discover import discover_releases
from puffer_core.matrix.discovered import GENERATED_BY, load_discovered
from puffer_core.matrix.simple_index import IndexUnreachable
from puffer_core.matrix.sources import discover as discover_plugins

PACKAGE = "puffer-test-follow"
NEW_CELL = "follow-puffer-test-follow1.1-py3.11"

PLUGIN_INIT = '''"""A test plugin of the discovery tests: it follows puffer-test-follow on the package index."""

from puffer_core import CompatAxes, EnvSpec, hookimpl

PUFFER_SMOKE_ENVS = ("follow/cartpole",)


def make_cartpole(**kwargs):
    import gymnasium
    import puffer_test_follow

    assert puffer_test_follow.VERSION
    return gymnasium.make("CartPole-v1", disable_env_checker=True, **kwargs)


@hookimpl
def puffer_envs():
    return [EnvSpec("follow/cartpole", make_cartpole, description="CartPole, once puffer-test-follow imports")]


@hookimpl
def puffer_compat_axes():
    return CompatAxes(package="puffer-test-follow", versions=("1.0",), python=("3.11",))
'''

PLUGIN_PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "puffer-plugin-follow"
version = "0.0.1"
description = "Matrix discovery test plugin (tests/matrix/test_matrix_discover.py)"
dependencies = ["puffer-core", "gymnasium"]

[project.entry-points.puffer]
follow = "puffer_plugin_follow"

[tool.setuptools]
packages = ["puffer_plugin_follow"]
"""


def write_follow_plugin(plugins: pathlib.Path) -> pathlib.Path:
    """``plugins/follow``: the test plugin's source folder, as ``--plugins-dir`` reads it."""
    folder = plugins / "follow"
    (folder / "puffer_plugin_follow").mkdir(parents=True)
    (folder / "puffer_plugin_follow" / "__init__.py").write_text(PLUGIN_INIT)
    (folder / "pyproject.toml").write_text(PLUGIN_PYPROJECT)
    return folder


def write_follow_index(root: pathlib.Path) -> pathlib.Path:
    """A PEP 503 folder: 1.0 (declared), 1.1 (new), 1.2rc1 (a pre-release), 1.3 (yanked); returns ``root/simple``."""
    files = root / "files"
    wheels = [build_wheel(files, PACKAGE, version) for version in ("1.0", "1.1", "1.2rc1", "1.3")]
    entries = [(wheel.name, ">=3.8", wheel.name.startswith("puffer_test_follow-1.3-")) for wheel in wheels]
    write_project_page(root, PACKAGE, entries)
    return root / "simple"


@pytest.fixture
def layout(tmp_path):
    plugins = tmp_path / "plugins"
    write_follow_plugin(plugins)
    simple = write_follow_index(tmp_path / "index")
    yield {"plugins": plugins, "out": tmp_path / "out", "index": simple.as_uri()}
    sys.modules.pop("puffer_plugin_follow", None)  # the next test imports its own copy


def test_discovery_keeps_the_new_release_and_says_what_it_adds(layout):
    sources = discover_plugins(layout["plugins"], include_builtins=False)
    dry = discover_releases(sources, layout["out"], layout["index"], dry_run=True)
    assert dry.packages[PACKAGE].releases == ["1.1"] and not dry.written
    assert not (layout["out"] / "discovered.json").exists()

    report = discover_releases(sources, layout["out"], layout["index"])
    news = report.packages[PACKAGE]
    assert news.releases == ["1.1"] and news.new == ["1.1"]  # not the pre-release, not the yanked one
    assert news.cells == {"follow": [NEW_CELL]} and report.added == {"follow": {NEW_CELL}}
    path = layout["out"] / "discovered.json"
    document = json.loads(path.read_text())
    assert document["generated_by"] == GENERATED_BY and document["indexes_asked"] == 1
    assert document["packages"][PACKAGE]["followed_by"] == ["follow"]
    assert str(layout["index"]) not in path.read_text()  # index URLs are printed, never kept
    assert load_discovered(path)[PACKAGE]["1.1"].install_problem(PACKAGE, "3.11") is None

    before = path.read_bytes()
    again = discover_releases(sources, layout["out"], layout["index"])
    assert not again.written and again.packages[PACKAGE].new == [] and again.added == {}
    assert path.read_bytes() == before  # nothing new: not even the date changes

    with pytest.raises(IndexUnreachable, match=r"cannot reach the package index http://127\.0\.0\.1"):
        discover_releases(sources, layout["out"], f"http://127.0.0.1:{closed_port()}/simple", timeout=5)
    assert path.read_bytes() == before


def _invoke(*args: str):
    return CliRunner().invoke(matrix, list(args))


def test_cli_discover_json_and_text(layout):
    common = ["--plugins-dir", str(layout["plugins"]), "--no-builtins", "--out", str(layout["out"])]
    result = _invoke("discover", "--index", layout["index"], "--json", "--dry-run", *common)
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert found["packages"][PACKAGE]["new"] == ["1.1"] and found["added_cells"] == {"follow": [NEW_CELL]}
    assert found["dry_run"] and not (layout["out"] / "discovered.json").exists()

    result = _invoke("discover", "--index", layout["index"], *common)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"{PACKAGE} (followed by follow): 1.1 (new) → cells added: follow 1" in text
    assert "wrote" in text and (layout["out"] / "discovered.json").exists()


def test_cli_run_discover_dry_run_and_errors(layout):
    common = ["--plugins-dir", str(layout["plugins"]), "--no-builtins", "--out", str(layout["out"]), "--no-common"]
    result = _invoke("run", "--discover", "--index", layout["index"], "--dry-run", *common)
    assert result.exit_code == 0, result.output
    assert f"would run {NEW_CELL}: puffer-test-follow==1.1 (new cell)" in result.output
    assert "would run follow-puffer-test-follow1.0-py3.11: puffer-test-follow==1.0 (new cell)" in result.output
    assert not (layout["out"] / "discovered.json").exists() and not (layout["out"] / "results.json").exists()

    port = closed_port()
    result = _invoke("run", "--discover", "--index", f"http://u:secret@127.0.0.1:{port}/simple", *common)
    assert result.exit_code == 1
    assert f"cannot reach the package index http://127.0.0.1:{port}/simple" in result.output
    assert "secret" not in result.output and "Traceback" not in result.output
    assert not (layout["out"] / "results.json").exists()

    result = _invoke("run", "--index", layout["index"], "--dry-run", *common)
    assert result.exit_code != 0 and "--index only tells --discover where to look" in result.output


def test_dry_run_counts_the_reasons(layout):
    common = ["--plugins-dir", str(layout["plugins"]), "--no-builtins", "--out", str(layout["out"]), "--no-common"]
    result = _invoke("run", "--discover", "--index", layout["index"], "--dry-run", *common)
    assert result.exit_code == 0, result.output
    assert "2 cell(s) would run with 1 job(s) (new cell: 2); 0 unchanged" in " ".join(result.output.split())
