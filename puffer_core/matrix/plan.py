"""Which cells a run must run, and why: the selection checked, each cell's input hash against its record.

A cell whose input hash (cell, plugin source, core source, runner schema; a tank-only
cell's image too) matches its
record is skipped unless ``--force``; an excluded (known-bad) cell is recorded, not run;
rows of cells and plugins that are gone are pruned from results.json. The cells are the
declared ones and those the discovered releases add (:mod:`~puffer_core.matrix.follow`).
Each record keeps the parts of its input hash, so the next plan says which changed
(:func:`stale_reason`); the record of a run keeps that reason.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from puffer_core.matrix.environment import cell_environment, check_pass_env
from puffer_core.matrix.follow import Discovered, plugin_cells
from puffer_core.matrix.job import JobResult
from puffer_core.matrix.model import Cell, select_cells, version_key
from puffer_core.matrix.options import RunOptions
from puffer_core.matrix.processes import scratch_dirs
from puffer_core.matrix.sources import PluginSource, discover
from puffer_core.matrix.store import CellRecord, MatrixError, ResultStore, now
from puffer_core.matrix.tank_cells import TankImage, check_tank_image, find_tank_image
from puffer_core.specs.declarations import PYTHON_VERSION_RE

__all__ = [
    "RUNNER_SCHEMA",
    "STALE_REASONS",
    "Plan",
    "cell_input_hash",
    "cell_inputs",
    "cell_record",
    "check_python_option",
    "plan_cells",
    "select_plugins",
    "short_hash",
    "split_values",
    "stale_reason",
]

#: Bump when what a cell does changes in a way that invalidates old results.
RUNNER_SCHEMA = 2  # 2: cells see an allowlisted environment


def split_values(values: Iterable[str]) -> list[str]:
    """Repeated options and comma lists as one list: ``("a,b", "c")`` → ``["a", "b", "c"]``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def check_python_option(python: str) -> str:
    """``--python``'s value when it is a Python 3 version (``3.12``), else the one-line MatrixError."""
    if not PYTHON_VERSION_RE.match(python):
        raise MatrixError(f"--python {python!r} is not a Python 3 version: write versions like 3.12")
    return python


#: Each part of a cell's input hash, and what the plan says when it changed.
STALE_REASONS = {
    "cell": "cell definition changed",
    "runner": "runner changed",
    "plugin_src": "plugin source changed",
    "core_src": "core source changed",
    "image": "PufferTank image changed",
}


def short_hash(data: object) -> str:
    """The first 16 hex digits of the SHA-256 of ``data`` as sorted JSON: every input hash of the matrix."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def cell_inputs(cell: Cell, plugin_hash: str, core_hash: str, image: str | None = None) -> dict[str, object]:
    """The parts of ``cell``'s input hash, as its record keeps them (the cell as its own hash).

    A tank-only cell has one more, ``image``: the id of the image it runs in (``"none"`` without one)."""
    inputs: dict[str, object] = {
        "runner": RUNNER_SCHEMA,
        "cell": short_hash(cell.to_json()),
        "plugin_src": plugin_hash,
        "core_src": core_hash,
    }
    if cell.tank:
        inputs["image"] = image or "none"
    return inputs


def stale_reason(old: CellRecord | None, inputs: dict[str, object], input_hash: str, force: bool = False) -> str | None:
    """Why a (not excluded) cell must run, or None when its record is still valid."""
    if old is None:
        return "new cell"
    if force:
        return "--force"
    if old.input_hash == input_hash:
        return "no longer excluded" if old.outcome == "excluded" else None
    if not old.inputs:
        return "inputs changed (its record predates input tracking)"
    changed = [label for part, label in STALE_REASONS.items() if old.inputs.get(part) != inputs.get(part)]
    return ", ".join(changed) or "inputs changed"


def cell_input_hash(cell: Cell, plugin_hash: str, core_hash: str, image: str | None = None) -> str:
    """One hash of every input of ``cell`` (unchanged since results.json schema 1: old records stay valid;
    a tank-only cell's has the image's id too)."""
    data: dict[str, object] = {
        "runner": RUNNER_SCHEMA,
        "cell": cell.to_json(),
        "plugin_src": plugin_hash,
        "core_src": core_hash,
    }
    if cell.tank:
        data["image"] = image or "none"
    return short_hash(data)


def select_plugins(options: RunOptions) -> tuple[dict[str, PluginSource], dict[str, PluginSource]]:
    """Every plugin with compat axes, and the ones this run selects; bad selections refused."""
    options.plugins = split_values(options.plugins)
    options.pythons = split_values(options.pythons)
    options.pass_env = check_pass_env(split_values(options.pass_env))
    for py in options.pythons:
        check_python_option(py)
    check_tank_image(options.tank_image)
    sources = discover(options.plugins_dir, include_builtins=options.builtins)
    unknown = [name for name in options.plugins if name not in sources]
    if unknown:
        raise MatrixError(
            f"no plugin named {', '.join(map(repr, unknown))} declares compat axes; "
            f"known: {', '.join(sources) or 'none'} (plugins are read from {options.plugins_dir})"
        )
    selected = {name: src for name, src in sources.items() if not options.plugins or name in options.plugins}
    _check_pythons_declared(options.pythons, selected)
    return sources, selected


def _check_pythons_declared(pythons: list[str], selected: dict[str, PluginSource]) -> None:
    """Refuse a ``--python`` that no selected plugin lists: it would select no cell, silently."""
    declared = {py for src in selected.values() if src.axes is not None for py in src.axes.python}
    unknown = [py for py in pythons if py not in declared]
    if unknown and declared:
        raise MatrixError(
            f"--python {', '.join(unknown)}: no selected plugin lists it in its compat axes, so no cell "
            f"would run; they list {', '.join(sorted(declared, key=version_key))}"
        )


@dataclass
class Plan:
    """The cells to run with their input hashes, every plugin's current cell ids, and what was not run."""

    todo: list[tuple[Cell, str, PluginSource]] = field(default_factory=list)
    current: dict[str, set[str]] = field(default_factory=dict)
    skipped: int = 0
    excluded: int = 0
    outcomes: Counter = field(default_factory=Counter)  # of the cells not run: excluded and unchanged
    warnings: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # cell id → why it runs
    inputs: dict[str, dict[str, object]] = field(default_factory=dict)  # cell id → the parts of its input hash
    #: The image tank-only cells run in, looked up once when the run has such a cell.
    tank_image: TankImage | None = None


def plan_cells(
    options: RunOptions,
    store: ResultStore,
    sources: dict[str, PluginSource],
    selected: dict[str, PluginSource],
    core_hash: str,
    uv: str,
    discovered: Discovered | None = None,
) -> Plan:
    """The run's plan; records excluded cells and prunes rows of cells and plugins that are gone.

    ``discovered``: the releases discovered.json keeps, which add cells to the declared ones.
    """
    plan = Plan()
    if options.builtins and not options.plugins:
        # A plugin folder that is gone takes its rows with it (a filtered run cannot tell).
        for gone in sorted(set(store.data["plugins"]) - set(sources)):
            store.data["plugins"].pop(gone, None)
            store.prune(gone, set())
    for name, source in sources.items():
        store.data["plugins"][name] = _plugin_meta(source, options)
        if source.axes is None:
            if name in selected:
                plan.warnings.append(f"plugin {name} could not be loaded, so it has no cells: {source.error}")
            continue
        all_cells = plugin_cells(name, source.axes, discovered)
        plan.current[name] = {c.id for c in all_cells}
        store.prune(name, plan.current[name])
        if name not in selected:
            continue
        plugin_hash = source.tree_hash()
        for cell in select_cells(all_cells, options.pythons, options.quick):
            image = None
            if cell.tank and cell.excluded is None:
                if plan.tank_image is None:
                    plan.tank_image = find_tank_image(options.tank_image, options.pass_env)
                image = plan.tank_image.id
            input_hash = cell_input_hash(cell, plugin_hash, core_hash, image)
            inputs = cell_inputs(cell, plugin_hash, core_hash, image)
            reason = _needs_run(cell, input_hash, inputs, store, options, uv, plan)
            if reason is not None:
                plan.todo.append((cell, input_hash, source))
                plan.reasons[cell.id] = reason
                plan.inputs[cell.id] = inputs
    return plan


def _needs_run(
    cell: Cell, input_hash: str, inputs: dict[str, object], store: ResultStore, options: RunOptions, uv: str, plan: Plan
) -> str | None:
    """Why ``cell`` must run, or None; an excluded cell is recorded, an unchanged one counted."""
    old = store.get(cell.id)
    if cell.excluded is not None:
        plan.excluded += 1
        plan.outcomes["excluded"] += 1
        if old is None or old.input_hash != input_hash or old.outcome != "excluded" or options.force:
            same = old is not None and old.input_hash == input_hash and not options.force
            reason = "newly excluded" if same else (stale_reason(old, inputs, input_hash, options.force) or "")
            store.put(cell_record(cell, input_hash, None, excluded=True, reason=reason, inputs=inputs))
        return None
    reason = stale_reason(old, inputs, input_hash, options.force)
    if (
        reason is None
        and old.outcome == "interpreter-missing"
        and _interpreter_found(uv, cell.python, tuple(options.pass_env))
    ):
        reason = f"Python {cell.python} found now"  # the interpreter has appeared since: worth a real try
    if reason is None:
        plan.skipped += 1
        plan.outcomes[old.outcome] += 1
    return reason


@functools.cache
def _interpreter_found(uv: str, python: str, pass_env: tuple[str, ...] = ()) -> bool:
    with scratch_dirs() as (home, cwd):  # as the cell's own uv commands run: no .python-version of the caller's
        env = {**cell_environment("install", pass_env), "HOME": home}
        try:
            cmd = [uv, "python", "find", "--", python]
            proc = subprocess.run(cmd, capture_output=True, env=env, cwd=cwd, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return proc.returncode == 0


def _plugin_meta(source: PluginSource, options: RunOptions) -> dict[str, Any]:
    """The plugin's row of results.json: where it comes from and its axes."""
    axes = source.axes
    meta: dict[str, Any] = {
        "source": "builtin" if source.builtin else options.shown(source.path),
        "distribution": source.distribution,
        "error": source.error,
    }
    if axes is not None:
        meta.update(
            package=axes.package,
            versions=list(axes.versions),
            python=list(axes.python),
            pins={version: dict(pins) for version, pins in axes.pins.items()},
            axes={name: list(values) for name, values in axes.axes.items()},
            extras=list(axes.extras),
            known_bad=[{"when": dict(bad.when), "reason": bad.reason} for bad in axes.known_bad],
        )
        if axes.tank_only:
            meta["tank_only"] = True
    return meta


def cell_record(
    cell: Cell,
    input_hash: str,
    result: JobResult | None,
    excluded: bool = False,
    reason: str = "",
    inputs: dict[str, object] | None = None,
) -> CellRecord:
    """The record results.json keeps of ``cell``: its job's result, or its exclusion reason; why it ran."""
    data = cell.to_json()
    record = CellRecord(
        id=cell.id,
        plugin=cell.plugin,
        python=cell.python,
        package=cell.package,
        version=cell.version,
        pins=data["pins"],
        companions=data["companions"],
        axes=data["axes"],
        extras=data["extras"],
        row=cell.row,
        outcome="excluded" if excluded else result.outcome,
        input_hash=input_hash,
        finished_at=now(),
        inputs=dict(inputs or {}),
        reason=reason,
    )
    if excluded:
        record.error = cell.excluded
    else:
        record.seconds = result.seconds
        record.resolved = result.resolved
        record.error = result.error
        record.log = result.log
        record.envs = result.envs
    return record
