"""Which cells a run must run: input hashes."""

from __future__ import annotations

from matrix_samples import AXES

from puffer_core.matrix.model import cells_for
from puffer_core.matrix.plan import cell_input_hash


def test_input_hash_changes_with_any_input():
    cell = cells_for("nethack", AXES)[0]
    base = cell_input_hash(cell, "plugin", "core")
    assert base == cell_input_hash(cell, "plugin", "core")
    assert base != cell_input_hash(cell, "plugin2", "core")
    assert base != cell_input_hash(cell, "plugin", "core2")
    assert base != cell_input_hash(cells_for("nethack", AXES)[1], "plugin", "core")
