"""Sample inputs the matrix tests share: compat axes, cell records, a results.json."""

from __future__ import annotations

from puffer_core import CompatAxes, KnownBad
from puffer_core.matrix.model import cells_for
from puffer_core.matrix.store import CellRecord

AXES = CompatAxes(
    package="nle",
    versions=("0.9.1", "1.2.0", "1.3.0"),
    python=("3.10", "3.12"),
    pins={"0.9.1": {"gym": "0.23.1"}, "1.3.0": {"gymnasium": "1.2.0"}},
    axes={"gymnasium": ("1.0.0", "1.1.1"), "six": ("1.16.0", "1.17.0")},
    known_bad=(KnownBad({"NLE": "<1.0", "python": ">=3.12"}, "0.9 predates 3.12"),),
    extras=("opencv-python-headless",),
)


def record(plugin, version, pins, outcome="pass", python="3.11", package="pkg"):
    return CellRecord(
        id=f"{plugin}-{version}-py{python}",
        plugin=plugin,
        python=python,
        package=package,
        version=version,
        pins={package: version, **pins},
        outcome=outcome,
    )


def results_data():
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
