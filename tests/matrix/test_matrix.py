"""The compat matrix's pieces without installs: cells, known-bad, common set, hashes, store, views, smoke."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from puffer_core import CompatAxes, KnownBad
from puffer_core.matrix import common, render, sources
from puffer_core.matrix.cli import matrix
from puffer_core.matrix.model import cells_for, known_bad_reason, newest_cell, select_cells
from puffer_core.matrix.runner import (
    Job,
    Processes,
    RunOptions,
    Wheels,
    cell_input_hash,
    find_uv,
    run_job,
    summarize_log,
)
from puffer_core.matrix.smoke import smoke
from puffer_core.matrix.sources import core_tree_hash, discover, plugin_tree_hash
from puffer_core.matrix.store import CellRecord, MatrixError, ResultStore

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "matrix_fixture_plugin"

AXES = CompatAxes(
    package="nle",
    versions=("0.9.1", "1.2.0", "1.3.0"),
    python=("3.10", "3.12"),
    pins={"0.9.1": {"gym": "0.23.1"}, "1.3.0": {"gymnasium": "1.2.0"}},
    axes={"gymnasium": ("1.0.0", "1.1.1"), "six": ("1.16.0", "1.17.0")},
    known_bad=(KnownBad({"NLE": "<1.0", "python": ">=3.12"}, "0.9 predates 3.12"),),
    extras=("opencv-python-headless",),
)


# -- cells ---------------------------------------------------------------------------------


def test_cells_multiply_versions_axes_and_python():
    cells = cells_for("nethack", AXES)
    # 0.9.1: 2 gymnasium × 2 six × 2 python; 1.2.0 the same; 1.3.0 pins gymnasium: 2 six × 2 python
    assert len(cells) == 8 + 8 + 4
    assert len({c.id for c in cells}) == len(cells)
    one = next(c for c in cells if c.version == "1.3.0" and c.python == "3.10" and dict(c.axes)["six"] == "1.16.0")
    assert one.id == "nethack-nle1.3.0-six1.16.0-py3.10"
    assert one.pins == {"nle": "1.3.0", "gymnasium": "1.2.0", "six": "1.16.0"}
    assert one.requirements() == ["nle==1.3.0", "gymnasium==1.2.0", "six==1.16.0", "opencv-python-headless"]
    assert one.row == "nle1.3.0-six1.16.0"


def test_known_bad_cells_are_kept_with_their_reason():
    cells = cells_for("nethack", AXES)
    excluded = [c for c in cells if c.excluded]
    assert excluded and all(c.version == "0.9.1" and c.python == "3.12" for c in excluded)
    assert {c.excluded for c in excluded} == {"0.9 predates 3.12"}
    assert known_bad_reason(AXES, "3.10", {"nle": "0.9.1"}) is None  # canonical names: NLE == nle


def test_quick_is_the_newest_non_excluded_cell_on_the_default_python():
    axes = CompatAxes(
        package="x",
        versions=("1.0", "2.0", "10.0"),
        python=("3.10", "3.11"),
        known_bad=(KnownBad({"x": ">=10"}, "broken"),),
    )
    cells = cells_for("p", axes)
    assert newest_cell(cells).id == "p-x2.0-py3.11"  # 10.0 is excluded; 2.0 > 1.0 as versions, not text
    assert [c.id for c in select_cells(cells, quick=True)] == ["p-x2.0-py3.11"]
    assert [c.id for c in select_cells(cells, pythons=["3.10"], quick=True)] == ["p-x2.0-py3.10"]
    assert {c.python for c in select_cells(cells, pythons=["3.10"])} == {"3.10"}
    only_312 = CompatAxes(package="x", versions=("1.0",), python=("3.12", "3.13"))
    assert newest_cell(cells_for("p", only_312)).python == "3.13"  # default Python not listed: newest


def test_input_hash_changes_with_any_input():
    cell = cells_for("nethack", AXES)[0]
    base = cell_input_hash(cell, "plugin", "core")
    assert base == cell_input_hash(cell, "plugin", "core")
    assert base != cell_input_hash(cell, "plugin2", "core")
    assert base != cell_input_hash(cell, "plugin", "core2")
    assert base != cell_input_hash(cells_for("nethack", AXES)[1], "plugin", "core")


# -- hashes --------------------------------------------------------------------------------


def _fake_core(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "core"
    (root / "puffer_core" / "matrix").mkdir(parents=True)
    (root / "puffer_core" / "__init__.py").write_text("x = 1\n")
    (root / "puffer_core" / "matrix" / "smoke.py").write_text("smoke = 1\n")
    (root / "puffer_core" / "matrix" / "render.py").write_text("render = 1\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "puffer-core"\nversion = "0.1.0"\ndependencies = ["numpy"]\n'
        "[project.optional-dependencies]\ncommon = []\n[tool.ruff]\nline-length = 120\n"
    )
    return root


def test_core_hash_follows_what_runs_in_a_cell(tmp_path):
    root = _fake_core(tmp_path)
    base = core_tree_hash(root)
    (root / "puffer_core" / "matrix" / "render.py").write_text("render = 2\n")  # host-only: same hash
    (root / "puffer_core" / "cli").mkdir()
    (root / "puffer_core" / "cli" / "main.py").write_text("cli = 1\n")  # the CLI never runs in a cell
    (root / "puffer_core" / "tank").mkdir()
    (root / "puffer_core" / "tank" / "render.py").write_text("tank = 1\n")
    (root / "puffer_core" / "__pycache__").mkdir()
    (root / "puffer_core" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace("common = []", 'common = ["a"]').replace("120", "100"))
    assert core_tree_hash(root) == base
    (root / "puffer_core" / "vector").mkdir()
    (root / "puffer_core" / "vector" / "mp.py").write_text("mp = 1\n")  # a new module that cells run
    assert core_tree_hash(root) != base
    (root / "puffer_core" / "vector" / "mp.py").unlink()
    (root / "puffer_core" / "vector").rmdir()
    (root / "puffer_core" / "matrix" / "smoke.py").write_text("smoke = 2\n")  # runs in the cell
    second = core_tree_hash(root)
    assert second != base
    (root / "pyproject.toml").write_text(text.replace('["numpy"]', '["numpy>=2"]'))  # a dependency
    assert core_tree_hash(root) != second


def test_plugin_hash_ignores_tests_and_caches(tmp_path):
    plugin = tmp_path / "fixture"
    shutil.copytree(FIXTURE, plugin)
    base = plugin_tree_hash(plugin)
    (plugin / "tests").mkdir()
    (plugin / "tests" / "test_x.py").write_text("assert True\n")
    (plugin / "build").mkdir()
    (plugin / "build" / "junk").write_text("x")
    assert plugin_tree_hash(plugin) == base
    init = plugin / "puffer_plugin_fixture" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    assert plugin_tree_hash(plugin) != base


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


# -- common set ----------------------------------------------------------------------------


def _rec(plugin, version, pins, outcome="pass", python="3.11", package="pkg"):
    return CellRecord(
        id=f"{plugin}-{version}-py{python}",
        plugin=plugin,
        python=python,
        package=package,
        version=version,
        pins={package: version, **pins},
        outcome=outcome,
    )


def test_common_takes_the_newest_passing_cells_that_agree():
    records = [
        _rec("atari", "0.11", {"gymnasium": "1.1.1"}),
        _rec("atari", "0.10", {"gymnasium": "1.0.0"}),
        _rec("nethack", "1.3", {"gymnasium": "1.2.0"}, outcome="smoke-failed"),
        _rec("nethack", "1.2", {"gymnasium": "1.0.0"}),
        _rec("nethack", "1.1", {"gymnasium": "1.0.0"}, python="3.12"),
        _rec("pz", "1.27", {"gymnasium": "1.2.0"}),
        _rec("dmlab", "1.0", {}, outcome="install-failed"),
        _rec("classic", "1.0.0", {}, package="gymnasium"),
        _rec("classic", "1.2.0", {}, package="gymnasium"),
    ]
    plan = common.choose_common(records, ["atari", "classic", "dmlab", "nethack", "pz"], builtins=["classic"])
    chosen = {c.plugin: c for c in plan.members}
    assert chosen["atari"].pins == {"pkg": "0.11", "gymnasium": "1.1.1"} and chosen["atari"].newest
    # nethack's only passing cell on 3.11 pins gymnasium 1.0.0; atari (first) holds 1.1.1
    assert "nethack" in plan.dropped and "gymnasium==1.0.0" in plan.dropped["nethack"]
    assert "pz" in plan.dropped
    assert "no passing cell" in plan.dropped["dmlab"] and "install-failed" in plan.dropped["dmlab"]
    # the built-in goes last and takes an older version that agrees with the set
    assert "classic" in plan.dropped  # 1.2.0 and 1.0.0 both clash with gymnasium 1.1.1
    records.append(_rec("classic", "1.1.1", {}, package="gymnasium"))
    plan = common.choose_common(records, ["atari", "classic"], builtins=["classic"])
    assert [c.plugin for c in plan.members] == ["atari", "classic"]
    assert plan.members[1].pins == {"gymnasium": "1.1.1"} and not plan.members[1].newest


def test_constraints_file_is_deterministic_and_says_it_is_generated():
    section = {
        "python": "3.11",
        "members": [
            {
                "plugin": "atari",
                "pins": {"ale-py": "0.11.2", "gymnasium": "1.1.1"},
                "distribution": "puffer-plugin-atari",
            }
        ],
        "dropped": {"dmlab": "no passing cell"},
        "joint": {
            "id": "common-py3.11",
            "outcome": "pass",
            "resolved": {"numpy": "2.2.6", "gymnasium": "1.1.1", "puffer-plugin-atari": "0.1.0"},
        },
    }
    text = common.constraints_text(section)
    assert text == common.constraints_text(json.loads(json.dumps(section)))
    assert text.startswith("# GENERATED")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == ["ale-py==0.11.2", "gymnasium==1.1.1", "numpy==2.2.6", "puffer-plugin-atari==0.1.0"]
    assert "#   dmlab: no passing cell" in text


# -- logs, store, views ----------------------------------------------------------------------


def test_summaries_pick_the_telling_line():
    resolver = (
        "Using Python 3.11.7 environment at: x\n  × No solution found when resolving dependencies:\n"
        "  ╰─▶ Because there is no version of six==99.0 and you require six==99.0, we can conclude that your "
        "requirements are unsatisfiable.\n[exit code 1]\n"
    )
    assert summarize_log(resolver).startswith("Because there is no version of six==99.0")
    build = (
        "Resolved 5 packages\n  × Failed to build `nle==0.9.1`\n  ├─▶ The build backend returned an error\n"
        "  ╰─▶ Call to `setuptools.build_meta.build_wheel` failed (exit status: 1)\n\n      [stderr]\n"
        "      CMake Error at CMakeLists.txt:3 (project): no CMAKE_C_COMPILER could be found.\n"
        "      hint: This usually indicates a problem with the package or the build environment.\n"
    )
    summary = summarize_log(build)
    assert summary.startswith("Failed to build `nle==0.9.1`") and "CMake Error" in summary
    trace = 'Traceback (most recent call last):\n  File "x", line 1\nValueError: bad shape\n'
    assert summarize_log(trace) == "ValueError: bad shape"
    assert len(summarize_log("x" * 1000)) <= 240


def test_store_writes_atomically_from_many_threads(tmp_path):
    store = ResultStore(tmp_path / "results.json")

    def put(i):
        store.put(_rec(f"p{i}", "1.0", {}))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["cells"]) == 20
    assert not list(tmp_path.glob(".results.json.*"))  # no temporary file left behind
    assert ResultStore(tmp_path / "results.json").get("p3-1.0-py3.11").outcome == "pass"
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(MatrixError, match="not valid JSON"):
        ResultStore(tmp_path / "results.json")


def _data():
    cells = {}
    for cell in cells_for(
        "fixture",
        CompatAxes(
            package="gymnasium",
            versions=("1.0.0", "1.2.0"),
            python=("3.11", "3.12"),
            pins={"1.2.0": {"numpy": "2.2.6"}},
            known_bad=(KnownBad({"gymnasium": "<1.1", "python": "==3.12"}, "too old | for 3.12"),),
        ),
    ):
        record = CellRecord(
            id=cell.id,
            plugin=cell.plugin,
            python=cell.python,
            package=cell.package,
            version=cell.version,
            pins=cell.pins,
            companions=dict(cell.companions),
            row=cell.row,
            outcome="excluded" if cell.excluded else "pass",
            error=cell.excluded,
            seconds=3.2,
        )
        cells[cell.id] = record.to_json()
    cells["fixture-gymnasium1.2.0-py3.12"].update(outcome="install-failed", error="no wheel", log="logs/x.log")
    return {
        "schema": 1,
        "plugins": {
            "fixture": {"package": "gymnasium", "versions": ["1.0.0", "1.2.0"], "python": ["3.11", "3.12"]},
            "broken": {"error": "plugin 'broken' failed to import"},
        },
        "cells": cells,
        "runs": {"cold": {"ran": 3, "seconds": 60.0, "jobs": 2, "cells_per_minute": 3.0}},
        "common": None,
    }


def test_markdown_has_a_table_per_plugin_with_reasons_and_legend():
    text = render.render_markdown(_data())
    assert text.startswith("<!-- GENERATED")
    assert "| gymnasium (companion pins) | Python 3.11 | Python 3.12 |" in text
    assert "**gymnasium 1.2.0**<br>numpy 2.2.6" in text
    assert "🚫 excluded: too old \\| for 3.12" in text  # the reason, with the pipe escaped
    assert "📦❌ install-failed 3.2 s" in text and "no wheel" in text
    assert "3.0 cells per minute" in text
    assert "## Legend" in text and "`interpreter-missing`" in text
    assert "broken" in text and "could not be loaded" in text
    html = render.render_html(_data())
    assert "<table" in html and "background:#d7f5dd" in html and "too old | for 3.12" in html


def test_show_prints_and_rerenders(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(_data()))
    runner = CliRunner()
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "fixture" in result.output and "Python 3.12" in result.output
    assert (tmp_path / "README.md").exists() and (tmp_path / "index.html").exists()
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path), "--json", "--plugin", "fixture"])
    assert set(json.loads(result.output)["cells"]) == set(_data()["cells"])
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path), "--plugin", "nope"])
    assert result.exit_code != 0 and "no plugin named 'nope'" in result.output
    result = runner.invoke(matrix, ["show", "--out", str(tmp_path / "empty")])
    assert result.exit_code != 0 and "no results" in result.output


# -- the in-cell smoke run --------------------------------------------------------------------


def test_smoke_reports_a_missing_plugin_as_an_import_failure():
    report = smoke("no-such-plugin", vector=False)
    assert report["ok"] is False and report["kind"] == "import"
    assert "not installed here" in report["error"]


def test_smoke_runs_make_reset_step_and_round_trip():
    report = smoke("classic", envs=["classic/cartpole", "classic/probe_dict", "classic/probe_multiagent"], vector=False)
    assert report["ok"], report
    stages = {(s["stage"], s["env"]) for s in report["stages"]}
    assert ("emulation", "classic/probe_dict") in stages and ("step", "classic/probe_multiagent") in stages


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


def test_a_job_never_hands_uv_an_option_or_url_as_a_requirement(tmp_path):
    # The joint cell's requirements come from results.json, which anyone can edit: each is
    # checked again right before `uv pip install`, and nothing is built or installed.
    options = RunOptions(root=ROOT, out=tmp_path / "out", work=tmp_path / "work")
    uv, procs = find_uv(), Processes()
    for bad in ("--index-url=http://127.0.0.1:9/", "six @ http://127.0.0.1:9/six.whl"):
        job = Job(id="common-py3.11", python="3.11", plugins=[], requirements=["six==1.17.0", bad], reported=[])
        result = run_job(job, options, uv, Wheels(options, uv, procs), "core-hash", procs)
        assert result.outcome == "install-failed"
        assert result.error.startswith(f"refused to install {bad!r}"), result.error
        log = (tmp_path / "out" / "logs" / "common-py3.11.log").read_text()
        assert "pip install" not in log and not (tmp_path / "work" / "wheels").exists()


def test_a_cells_smoke_run_imports_no_module_left_out_of_the_core_hash():
    # The core hash skips the CLI, benchmarks, tank, testing kit and trainer because a
    # cell never imports them; if the smoke run ever did, editing them would leave stale
    # verdicts in results.json.
    code = (
        "import json, pathlib, sys\n"
        "from puffer_core.matrix import smoke\n"
        "report = smoke.smoke('classic', steps=4)\n"
        "assert report['ok'], report\n"
        "root = pathlib.Path(smoke.__file__).resolve().parents[2]\n"
        "mods = [m for n, m in [*sys.modules.items()] if n.startswith('puffer_core') and getattr(m, '__file__', 0)]\n"
        "files = [pathlib.Path(m.__file__).resolve().relative_to(root).as_posix() for m in mods]\n"
        "print(json.dumps(files))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    imported = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "puffer_core/vector/mp/backend.py" in imported  # the vector run happened
    left_out = [f for f in imported if sources._host_only(pathlib.Path(f))]
    assert left_out == []
