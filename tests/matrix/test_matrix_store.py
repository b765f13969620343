"""results.json: atomic writes from many threads, and a broken file refused."""

from __future__ import annotations

import json
import os
import threading

import pytest
from matrix_samples import record

from puffer_core.errors import APIUsageError
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


def test_results_go_only_into_a_directory_of_the_users_own(tmp_path):
    ResultStore(tmp_path / "new" / "results.json").put(record("p", "1.0", {}))
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone could plant results.json's temporary or a symlink there
    with pytest.raises(APIUsageError, match=f"^{shared} is writable by others"):
        ResultStore(shared / "results.json").put(record("p", "1.0", {}))
    assert os.listdir(shared) == []
