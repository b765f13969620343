"""results.json: atomic writes from many threads, and a broken file refused."""

from __future__ import annotations

import json
import threading

import pytest
from matrix_samples import record

from puffer_core.matrix.store import MatrixError, ResultStore


def test_store_writes_atomically_from_many_threads(tmp_path):
    store = ResultStore(tmp_path / "results.json")

    def put(i):
        store.put(record(f"p{i}", "1.0", {}))

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
