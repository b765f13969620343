"""`puffer matrix show` and `puffer matrix run --dry-run`: tables, views, selections refused."""

from __future__ import annotations

import json
import pathlib
import shutil

from click.testing import CliRunner
from matrix_samples import results_data

from puffer_core.cli.matrix import matrix

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "matrix_fixture_plugin"


def test_show_prints_and_rerenders(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(results_data()))
    runner = CliRunner()
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "fixture" in result.output and "Python 3.12" in result.output
    assert (tmp_path / "README.md").exists() and (tmp_path / "index.html").exists()
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path), "--json", "--plugin", "fixture"])
    assert set(json.loads(result.output)["cells"]) == set(results_data()["cells"])
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path), "--plugin", "nope"])
    assert result.exit_code != 0 and "no plugin named 'nope'" in result.output
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path / "empty")])
    assert result.exit_code != 0 and "no results" in result.output


def test_dry_run_lists_cells_and_changes_nothing(tmp_path):
    plugins = tmp_path / "plugins"
    shutil.copytree(FIXTURE, plugins / "fixture")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        matrix,
        ["run", "--dry-run", "--no-builtins", "--plugins-dir", str(plugins), "--out", str(out), "--python", "3.11"],
    )
    assert result.exit_code == 0, result.output
    assert "would run fixture-gymnasium1.2.0-py3.11: gymnasium==1.2.0 six==1.17.0" in result.output
    assert "py3.99" not in result.output
    assert not (out / "results.json").exists()
    # Unfiltered, the selection holds an excluded (known-bad) cell: still nothing is written.
    args = ["run", "--dry-run", "--no-builtins", "--plugins-dir", str(plugins), "--out", str(out)]
    result = CliRunner().invoke(matrix, args)
    assert result.exit_code == 0 and "excluded" in result.output, result.output
    assert not (out / "results.json").exists()
    result = CliRunner().invoke(
        matrix, ["run", "--dry-run", "--plugins-dir", str(plugins), "--out", str(out), "--python", "three"]
    )
    assert result.exit_code != 0 and "write versions like 3.12" in result.output


def test_run_refuses_a_python_that_no_selected_plugin_lists(tmp_path):
    # A well-formed version that no plugin lists would select no cell and "succeed" silently.
    plugins = tmp_path / "plugins"
    shutil.copytree(FIXTURE, plugins / "fixture")
    out = tmp_path / "out"
    args = ["run", "--dry-run", "--no-builtins", "--plugins-dir", str(plugins), "--out", str(out)]
    for wanted in ("9.9", "3.7"):
        result = CliRunner().invoke(matrix, [*args, "--python", wanted])
        assert result.exit_code != 0, result.output
        message = " ".join(result.output.split())
        if wanted == "9.9":
            assert "'9.9' is not a Python 3 version" in message
        else:
            assert "--python 3.7: no selected plugin lists it" in message and "they list 3.11" in message
    assert not (out / "results.json").exists()
