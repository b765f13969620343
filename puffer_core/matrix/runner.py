"""The matrix run: every selected cell in its own fresh uv venv, ``--jobs`` at a time, then the common set.

For each cell the runner (through :mod:`~puffer_core.matrix.job`)

1. creates ``<work>/venvs/<cell-id>`` with ``uv venv --clear --python X`` (no interpreter
   found: ``interpreter-missing``; uv never downloads one, ``UV_PYTHON_DOWNLOADS=never``),
2. installs puffer-core and the plugin (wheels built once per source hash, kept in
   ``<work>/wheels``) with the cell's pins, from uv's one shared cache (``install-failed``),
3. runs ``python -m puffer_core.testing.smoke --plugin NAME --json`` inside it
   (``import-failed`` / ``smoke-failed``), all within ``--timeout`` seconds (``timeout``),

and writes the record to results.json at once, with why it ran (``--dry-run`` prints it). A
tank-only plugin's cell runs the smoke run in a PufferTank image instead
(:mod:`~puffer_core.matrix.tank_cells`).
Everything a cell printed goes to ``compat_matrix/logs/<cell-id>.log``. With ``--discover`` the
package index is asked first for new releases (:mod:`~puffer_core.matrix.discover`). Unchanged
cells are skipped (:mod:`~puffer_core.matrix.plan`); failing cells never stop the run.

What reaches a command line from plugin data was checked when the plugin loaded
(``CompatAxes.validate``: package names, versions, PEP 508 requirements from the index) and
is checked again just before ``uv pip install`` (the joint cell's pins come from
results.json), which gets each requirement rebuilt from its parsed parts; options always
come before a ``--``. Every command runs with an allowlisted environment, not the caller's,
in an empty temporary directory with a temporary HOME: see :mod:`puffer_core.matrix.environment`
and ``--pass-env``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from puffer_core.matrix import views
from puffer_core.matrix.discover import discover_releases
from puffer_core.matrix.discovered import discovered_path, load_discovered
from puffer_core.matrix.environment import unmatched_pass_env
from puffer_core.matrix.job import REPORTED, Job, requirement_names, run_job
from puffer_core.matrix.joint import run_common
from puffer_core.matrix.model import Cell
from puffer_core.matrix.options import Reporter, RunOptions
from puffer_core.matrix.plan import Plan, cell_record, plan_cells, select_plugins
from puffer_core.matrix.processes import Interrupted, Processes
from puffer_core.matrix.shipped import write_shipped
from puffer_core.matrix.sources import PluginSource
from puffer_core.matrix.store import CellRecord, MatrixError, ResultStore, now
from puffer_core.matrix.tank_cells import TankImage, run_tank_job
from puffer_core.matrix.trees import core_tree_hash
from puffer_core.matrix.uv import find_uv
from puffer_core.matrix.wheels import WheelError, Wheels

__all__ = ["RunSummary", "require_uv", "run_matrix"]


@dataclass
class RunSummary:
    ran: int = 0
    skipped: int = 0
    excluded: int = 0
    outcomes: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    common: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def cells_per_minute(self) -> float:
        return self.ran / (self.seconds / 60) if self.seconds > 0 and self.ran else 0.0


def require_uv() -> str:
    """uv, or MatrixError saying how to get it."""
    uv = find_uv()
    if uv is None:
        raise MatrixError("the matrix needs uv: pip install uv (or set PUFFER_UV to its path)")
    return os.path.abspath(uv) if os.sep in uv else uv  # cells run elsewhere than the caller's directory


def run_matrix(options: RunOptions, report: Reporter | None = None) -> RunSummary:
    """Run (or skip) every selected cell, then the common set; results.json and views rewritten."""
    report = report or (lambda event, record, info: None)
    started = time.monotonic()
    started_at = now()
    summary = RunSummary()
    sources, selected = select_plugins(options)
    store = ResultStore(options.out / "results.json", read_only=options.dry_run)
    core_hash = core_tree_hash(options.root)
    uv = require_uv()
    procs = Processes(options.pass_env)
    summary.warnings += [
        f"--pass-env {pattern} matches no variable of this environment"
        for pattern in unmatched_pass_env(options.pass_env)
    ]
    wheels = Wheels(options, uv, procs)
    discovered = load_discovered(discovered_path(options.out))
    if options.discover:  # an index that cannot be read stops the run here, before anything is written
        discovery = discover_releases(sources, options.out, options.index, dry_run=options.dry_run)
        report("discovered", None, {"report": discovery})
        discovered = discovery.releases
    plan = plan_cells(options, store, sources, selected, core_hash, uv, discovered)
    summary.skipped, summary.excluded = plan.skipped, plan.excluded
    summary.outcomes.update(plan.outcomes)
    summary.warnings += plan.warnings
    info = {"todo": len(plan.todo), "skipped": plan.skipped, "excluded": plan.excluded}
    reasons = dict(Counter(plan.reasons.values()).most_common())
    report("start", None, {**info, "jobs": options.jobs, "dry_run": options.dry_run, "reasons": reasons})
    if options.dry_run:
        for cell, _, _ in plan.todo:
            why = plan.reasons[cell.id]
            report("would-run", None, {"id": cell.id, "requirements": cell.requirements(), "reason": why})
        summary.seconds = round(time.monotonic() - started, 2)
        return summary
    store.save()
    try:
        _prebuild(plan.todo, options, wheels, core_hash, report)
    except BaseException:
        procs.kill_all()  # an interrupt during a wheel build ends the build too
        raise
    _run_cells(plan, options, store, uv, wheels, core_hash, procs, report, summary)
    if options.common:
        summary.common = run_common(options, store, sources, plan.current, uv, wheels, core_hash, procs, report)
    summary.seconds = round(time.monotonic() - started, 2)
    _record_run(store, options, summary, started_at)
    views.write_views(store.data, options.out)
    if options.shipped is not None:
        write_shipped(store.data, options.shipped)
    return summary


def _cell_job(cell: Cell, source: PluginSource) -> Job:
    return Job(
        id=cell.id,
        python=cell.python,
        plugins=[source],
        requirements=cell.requirements(),
        reported=[
            *cell.pins,
            *requirement_names(cell.extras),
            *REPORTED,
            *([source.distribution] if source.distribution else []),
        ],
    )


def _run_cells(
    plan: Plan,
    options: RunOptions,
    store: ResultStore,
    uv: str,
    wheels: Wheels,
    core_hash: str,
    procs: Processes,
    report: Reporter,
    summary: RunSummary,
) -> None:
    """Run the plan's cells ``options.jobs`` at a time, each recorded (with why it ran) as it ends; an
    interrupt kills the rest."""

    def work(item: tuple[Cell, str, PluginSource]) -> CellRecord:
        cell, input_hash, source = item
        report("cell-start", None, {"id": cell.id, "reason": plan.reasons.get(cell.id, "")})
        job = _cell_job(cell, source)
        if cell.tank:
            result = run_tank_job(job, options, procs, plan.tank_image or TankImage(options.tank_image))
        else:
            result = run_job(job, options, uv, wheels, core_hash, procs)
        record = cell_record(
            cell, input_hash, result, reason=plan.reasons.get(cell.id, ""), inputs=plan.inputs.get(cell.id)
        )
        store.put(record)
        return record

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs))
    try:
        futures = [pool.submit(work, item) for item in plan.todo]
        for future in concurrent.futures.as_completed(futures):
            try:
                record = future.result()
            except Interrupted:
                continue
            summary.ran += 1
            summary.outcomes[record.outcome] += 1
            report("cell", record, {})
    except BaseException:
        procs.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _record_run(store: ResultStore, options: RunOptions, summary: RunSummary, started_at: str) -> None:
    """The run's statistics as results.json's ``runs.last`` (and ``runs.cold`` for a full cold run)."""
    stats = {
        "started_at": started_at,
        "finished_at": now(),
        "seconds": summary.seconds,
        "ran": summary.ran,
        "skipped": summary.skipped,
        "excluded": summary.excluded,
        "jobs": options.jobs,
        "outcomes": dict(summary.outcomes),
        "cells_per_minute": round(summary.cells_per_minute, 2),
        "selection": {
            "plugins": options.plugins,
            "python": options.pythons,
            "quick": options.quick,
            "force": options.force,
        },
        "full": options.full,
    }
    runs = dict(store.data.get("runs") or {})
    runs["last"] = stats
    if options.full and summary.ran and summary.skipped == 0:
        runs["cold"] = stats
    store.update(runs=runs)


def _prebuild(
    todo: list[tuple[Cell, str, PluginSource]], options: RunOptions, wheels: Wheels, core_hash: str, report: Reporter
) -> None:
    """Build the wheels the cells need before any cell starts, so build time is not cell time.

    A failed build is not raised here: each cell that needs the wheel records it as its
    install failure.
    """
    if not todo:
        return
    todo = [item for item in todo if not item[0].tank]  # a tank-only cell runs the image's own
    if not todo:
        return
    needed: dict[str, PluginSource] = {src.name: src for _, _, src in todo if src.path is not None}
    report("building", None, {"wheels": ["puffer-core", *needed]})
    with contextlib.suppress(WheelError):
        wheels.get("puffer-core", options.root, core_hash, core=True)
    for source in needed.values():
        with contextlib.suppress(WheelError):
            wheels.get(source.name, source.path, source.tree_hash())
