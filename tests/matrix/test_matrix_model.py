"""Cells from compat axes: versions × axes × Python, known-bad exclusions, the quick selection."""

from __future__ import annotations

from matrix_samples import AXES

from puffer_core import CompatAxes, KnownBad
from puffer_core.matrix.model import cells_for, known_bad_reason, newest_cell, select_cells


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
