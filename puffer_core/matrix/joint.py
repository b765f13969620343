"""The common sets proved: on each Python, its plugins installed together in one joint cell.

:mod:`puffer_core.matrix.common` chooses the members from the records; here the joint
cell runs them together. When it fails, the plugins are added one at a time and those
that break it are left out, with the reason. An unchanged plan (same members, cells and
core) keeps the last joint cell's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from puffer_core.matrix import common as common_mod
from puffer_core.matrix.job import REPORTED, Job, requirement_names, run_job
from puffer_core.matrix.model import DEFAULT_PYTHON, version_key
from puffer_core.matrix.options import Reporter, RunOptions
from puffer_core.matrix.plan import RUNNER_SCHEMA, short_hash
from puffer_core.matrix.processes import Processes
from puffer_core.matrix.sources import PluginSource
from puffer_core.matrix.store import ResultStore, now
from puffer_core.matrix.wheels import Wheels

__all__ = ["common_pythons", "run_common"]


@dataclass
class _JointCells:
    """Runs the joint cell (every member plugin installed together) of one common-set plan."""

    options: RunOptions
    store: ResultStore
    sources: dict[str, PluginSource]  # the plugins with axes
    python: str
    uv: str
    wheels: Wheels
    core_hash: str
    procs: Processes
    report: Reporter

    def input_hash(self, members: list[common_mod.Choice]) -> str:
        data = {
            "runner": RUNNER_SCHEMA,
            "python": self.python,
            "core_src": self.core_hash,
            "members": [(m.plugin, m.cell, self.store.get(m.cell).input_hash, m.pins) for m in members],
        }
        return short_hash(data)

    def job(self, members: list[common_mod.Choice]) -> Job:
        reqs: dict[str, str] = {}
        for member in members:
            for name, version in member.pins.items():
                reqs.setdefault(canonicalize_name(name), f"{name}=={version}")
            for extra in member.extras:
                reqs.setdefault(extra, extra)
        reported = [n for m in members for n in m.pins] + list(REPORTED)
        reported += [self.sources[m.plugin].distribution for m in members if self.sources[m.plugin].distribution]
        reported += [n for m in members for n in requirement_names(m.extras)]
        return Job(
            id=f"common-py{self.python}",
            python=self.python,
            plugins=[self.sources[m.plugin] for m in members],
            requirements=list(reqs.values()),
            reported=reported,
        )

    def run(self, members: list[common_mod.Choice]) -> dict[str, Any]:
        self.report("common-start", None, {"members": [m.plugin for m in members], "python": self.python})
        result = run_job(self.job(members), self.options, self.uv, self.wheels, self.core_hash, self.procs)
        joint = {
            "id": f"common-py{self.python}",
            "python": self.python,
            "members": [m.plugin for m in members],
            "outcome": result.outcome,
            "seconds": result.seconds,
            "resolved": result.resolved,
            "error": result.error,
            "log": result.log,
            "input_hash": self.input_hash(members),
            "finished_at": now(),
        }
        self.report("common", None, joint)
        return joint

    def largest_passing(
        self, members: list[common_mod.Choice], dropped: dict[str, str]
    ) -> tuple[list[common_mod.Choice], dict[str, Any] | None]:
        """The members whose joint cell passes, and that cell; those left out go to ``dropped``."""
        joint = self.run(members)
        if joint["outcome"] == "pass":
            return members, joint
        if len(members) == 1:
            dropped[members[0].plugin] = f"the joint cell fails ({joint['outcome']}): {joint['error']}"
            return [], joint
        # Find who breaks it: add the plugins one at a time, keep those that still pass.
        kept: list[common_mod.Choice] = []
        last_pass = None
        for member in members:
            trial = self.run([*kept, member])
            if trial["outcome"] == "pass":
                kept.append(member)
                last_pass = trial
            else:
                dropped[member.plugin] = f"the joint cell with it fails ({trial['outcome']}): {trial['error']}"
        return kept, last_pass or joint


def common_pythons(sources: dict[str, PluginSource]) -> list[str]:
    """The Pythons that get a common set: every one a plugin's axes list, the default first."""
    listed = {py for src in sources.values() if src.axes is not None for py in src.axes.python}
    return [DEFAULT_PYTHON, *sorted(listed - {DEFAULT_PYTHON}, key=version_key)]


def run_common(
    options: RunOptions,
    store: ResultStore,
    sources: dict[str, PluginSource],
    current: dict[str, set[str]],
    uv: str,
    wheels: Wheels,
    core_hash: str,
    procs: Processes,
    report: Reporter,
) -> dict[str, Any]:
    """The common set of every Python, each proved in its joint cell: the default Python's as
    ``common``, the others' as ``commons``. Returns the default's."""
    others = store.data.get("commons") or {}
    sections = {}
    for python in common_pythons(sources):
        previous = store.data.get("common") if python == DEFAULT_PYTHON else others.get(python)
        sections[python] = _common_on(
            python, previous or {}, options, store, sources, current, (uv, wheels, core_hash, procs, report)
        )
    default = sections.pop(DEFAULT_PYTHON)
    store.update(common=default, commons=dict(sorted(sections.items(), key=lambda kv: version_key(kv[0]))))
    return default  # constraints-common.txt is one of the views (views.view_texts), written after


def _common_on(
    python: str,
    previous: dict[str, Any],
    options: RunOptions,
    store: ResultStore,
    sources: dict[str, PluginSource],
    current: dict[str, set[str]],
    machinery: tuple,
) -> dict[str, Any]:
    """Choose the common set of one Python from the records and prove it in a joint cell."""
    uv, wheels, core_hash, procs, report = machinery
    with_axes = {name: src for name, src in sources.items() if src.axes is not None and not src.axes.tank_only}
    plan = common_mod.choose_common(
        store.records(),
        with_axes,
        builtins=[n for n, s in with_axes.items() if s.builtin],
        python=python,
        current=current,
    )
    dropped = dict(plan.dropped)
    for name, src in sources.items():
        if src.axes is not None and src.axes.tank_only:
            dropped[name] = "its package is on no index: only PufferTank's environment layer builds it"
    cells = _JointCells(options, store, with_axes, python, uv, wheels, core_hash, procs, report)
    plan_hash = cells.input_hash(plan.members) if plan.members else "empty"
    if previous.get("plan_hash") == plan_hash and not options.force and "members" in previous:
        return previous  # same members, same cells, same core: the joint cell's verdict stands
    members, joint = cells.largest_passing(list(plan.members), dropped) if plan.members else ([], None)
    return {
        "python": python,
        "plan_hash": plan_hash,
        "members": [
            {
                **m.to_json(),
                "distribution": with_axes[m.plugin].distribution,
                "package": with_axes[m.plugin].axes.package,
            }
            for m in members
        ],
        "dropped": dict(sorted(dropped.items())),
        "joint": joint,
    }
