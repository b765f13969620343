"""Which cells a run must run, and why: input hashes and their parts."""

from __future__ import annotations

from matrix_samples import AXES

from puffer_core import CompatAxes
from puffer_core.matrix.model import cells_for
from puffer_core.matrix.plan import RUNNER_SCHEMA, cell_input_hash, cell_inputs, cell_record, stale_reason
from puffer_core.matrix.releases import Release, ReleaseFile
from puffer_core.matrix.store import ResultStore


def test_input_hash_changes_with_any_input():
    cell = cells_for("nethack", AXES)[0]
    base = cell_input_hash(cell, "plugin", "core")
    assert base == cell_input_hash(cell, "plugin", "core")
    assert base != cell_input_hash(cell, "plugin2", "core")
    assert base != cell_input_hash(cell, "plugin", "core2")
    assert base != cell_input_hash(cells_for("nethack", AXES)[1], "plugin", "core")


def _planned(tmp_path, store, core="core", discovered=None, **option_values):
    from puffer_core.matrix.options import RunOptions
    from puffer_core.matrix.plan import plan_cells
    from puffer_core.matrix.sources import PluginSource

    axes = CompatAxes(package="gymnasium", versions=("1.2.0",), python=("3.11", "3.12"), follow={"numpy": ">=2.5"})
    sources = {"classic": PluginSource("classic", axes, None)}
    options = RunOptions(out=tmp_path, builtins=False, **option_values)
    return plan_cells(options, store, sources, sources, core, "uv", discovered)


def _record_all(plan, store):
    from puffer_core.matrix.job import JobResult

    for cell, input_hash, _ in plan.todo:
        result = JobResult(outcome="pass", seconds=1.0)
        store.put(cell_record(cell, input_hash, result, reason=plan.reasons[cell.id], inputs=plan.inputs[cell.id]))


def test_plan_says_why_each_cell_runs(tmp_path):
    store = ResultStore(tmp_path / "results.json")
    plan = _planned(tmp_path, store)
    assert plan.reasons == {"classic-gymnasium1.2.0-py3.11": "new cell", "classic-gymnasium1.2.0-py3.12": "new cell"}
    _record_all(plan, store)
    saved = store.get("classic-gymnasium1.2.0-py3.11")
    assert saved.reason == "new cell" and saved.inputs["core_src"] == "core" and saved.inputs["runner"] == RUNNER_SCHEMA
    assert _planned(tmp_path, store).todo == []  # nothing stale
    assert set(_planned(tmp_path, store, core="core2").reasons.values()) == {"core source changed"}
    assert set(_planned(tmp_path, store, force=True).reasons.values()) == {"--force"}
    # a discovered release adds its cells, and only those run
    numpy = {"numpy": {"2.5.5": Release("2.5.5", (ReleaseFile("any", ">=3.12"),))}}
    plan = _planned(tmp_path, store, discovered=numpy)
    assert plan.reasons == {"classic-gymnasium1.2.0-numpy2.5.5-py3.12": "new cell"}
    assert plan.excluded == 1  # 3.11: recorded as excluded with the reason, not run
    excluded = store.get("classic-gymnasium1.2.0-numpy2.5.5-py3.11")
    assert excluded.outcome == "excluded" and excluded.error == "numpy 2.5.5 declares Requires-Python >=3.12"
    assert plan.current["classic"] >= {"classic-gymnasium1.2.0-py3.11", "classic-gymnasium1.2.0-numpy2.5.5-py3.12"}
    # without discovered.json its cells are gone again (pruned), the declared ones untouched
    assert _planned(tmp_path, store).todo == []
    assert store.get("classic-gymnasium1.2.0-numpy2.5.5-py3.11") is None


def test_stale_reason_names_the_changed_inputs():
    cell = cells_for("nethack", AXES)[0]
    inputs = cell_inputs(cell, "plugin", "core")
    input_hash = cell_input_hash(cell, "plugin", "core")
    record = cell_record(cell, input_hash, None, excluded=True, inputs=inputs)
    record.outcome = "pass"
    assert stale_reason(None, inputs, input_hash) == "new cell"
    assert stale_reason(record, inputs, input_hash) is None
    assert stale_reason(record, inputs, input_hash, force=True) == "--force"
    changed = cell_inputs(cell, "plugin2", "core2")
    assert stale_reason(record, changed, "other") == "plugin source changed, core source changed"
    other_cell = cells_for("nethack", AXES)[1]
    assert stale_reason(record, cell_inputs(other_cell, "plugin", "core"), "other") == "cell definition changed"
    assert stale_reason(record, {**inputs, "runner": RUNNER_SCHEMA + 1}, "other") == "runner changed"
    old_style = cell_record(cell, "old-hash", None, excluded=True)  # a record from before inputs were kept
    old_style.outcome = "pass"
    assert stale_reason(old_style, inputs, input_hash) == "inputs changed (its record predates input tracking)"
    record.outcome = "excluded"
    assert stale_reason(record, inputs, input_hash) == "no longer excluded"
