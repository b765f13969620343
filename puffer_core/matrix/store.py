"""``compat_matrix/results.json``: one record per cell, rewritten atomically after every cell.

Layout::

    {
      "schema": 1,
      "updated_at": "...",
      "plugins": {name: {"package", "versions", "python", "pins", "axes", "extras",
                         "known_bad", "source", "distribution", "error"}},
      "cells": {cell_id: CellRecord},
      "runs": {"last": RunStats, "cold": RunStats | null},
      "common": {...} | null,         # the default Python's common set
      "commons": {python: {...}}      # the other Pythons' common sets
    }

Writes go to a temporary file in the same folder, then ``os.replace``: a reader (or a run
killed mid-write) only ever sees a complete document, and the next run resumes from it.
"""

from __future__ import annotations

import datetime as _dt
import json
import pathlib
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from puffer_core.atomic import private_directory, write_atomically
from puffer_core.errors import PufferError

__all__ = ["SCHEMA", "CellRecord", "MatrixError", "ResultStore", "atomic_write_text", "common_sections", "now"]

SCHEMA = 1


class MatrixError(PufferError):
    """A user error in a matrix command (unknown plugin, unreadable results, bad option)."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def common_sections(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """results.json's common sets: the default Python's (``common``) first, then the others' (``commons``)."""
    return [s for s in [data.get("common"), *(data.get("commons") or {}).values()] if s]


def atomic_write_text(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new file, never a part; its
    folder is made private if new, refused if others can write it (``atomic.private_directory``)."""
    private_directory(path.parent)
    write_atomically(path, text.encode("utf-8"))


@dataclass
class CellRecord:
    """The result of one cell."""

    id: str
    plugin: str
    python: str
    package: str
    version: str
    pins: dict[str, str]
    outcome: str
    companions: dict[str, str] = field(default_factory=dict)
    axes: dict[str, str] = field(default_factory=dict)
    extras: list[str] = field(default_factory=list)
    row: str = ""
    seconds: float = 0.0
    resolved: dict[str, str] = field(default_factory=dict)  # versions actually installed
    error: str | None = None  # the most telling line, or the exclusion reason
    log: str | None = None
    input_hash: str = ""
    finished_at: str = ""
    envs: list[str] = field(default_factory=list)  # the envs the smoke run used
    #: the parts of ``input_hash`` (runner, cell, plugin_src, core_src), so a later plan can say which changed
    inputs: dict[str, Any] = field(default_factory=dict)
    reason: str = ""  # why its last run ran: "new cell", "core source changed", "--force", …

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellRecord:
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


class ResultStore:
    """Thread-safe results.json: ``put`` a record and the file is rewritten atomically."""

    def __init__(self, path: pathlib.Path, read_only: bool = False):
        self.path = pathlib.Path(path)
        self._lock = threading.Lock()
        #: a dry run plans on the records in memory and writes nothing
        self.read_only = read_only
        self.data: dict[str, Any] = self._load()

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            empty = {"plugins": {}, "cells": {}, "runs": {}, "common": None, "commons": {}}
            return {"schema": SCHEMA, "updated_at": None, **empty}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise MatrixError(f"{self.path} is not valid JSON ({exc}); move it aside and run the matrix again") from exc
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise MatrixError(
                f"{self.path} has schema {data.get('schema') if isinstance(data, dict) else '?'}, "
                f"this puffer-core writes schema {SCHEMA}; move it aside and run the matrix again"
            )
        for key, default in (("plugins", {}), ("cells", {}), ("runs", {}), ("common", None), ("commons", {})):
            data.setdefault(key, default)
        return data

    @property
    def exists(self) -> bool:
        return self.path.exists()

    # -- reads ----------------------------------------------------------------------------

    def get(self, cell_id: str) -> CellRecord | None:
        with self._lock:
            raw = self.data["cells"].get(cell_id)
        return CellRecord.from_json(raw) if raw else None

    def records(self) -> list[CellRecord]:
        with self._lock:
            return [CellRecord.from_json(raw) for raw in self.data["cells"].values()]

    # -- writes ---------------------------------------------------------------------------

    def put(self, record: CellRecord) -> None:
        with self._lock:
            self.data["cells"][record.id] = record.to_json()
            self._save()

    def update(self, **sections: Any) -> None:
        """Replace top-level sections (``plugins``, ``runs``, ``common``) and save."""
        with self._lock:
            self.data.update(sections)
            self._save()

    def set_plugin(self, name: str, meta: dict[str, Any]) -> None:
        with self._lock:
            self.data["plugins"][name] = meta
            self._save()

    def prune(self, plugin: str, keep: set[str]) -> list[str]:
        """Forget the cells of ``plugin`` that its axes no longer produce."""
        with self._lock:
            stale = [cid for cid, raw in self.data["cells"].items() if raw["plugin"] == plugin and cid not in keep]
            for cid in stale:
                del self.data["cells"][cid]
            if stale:
                self._save()
            return stale

    def _save(self) -> None:
        if self.read_only:
            return
        self.data["schema"] = SCHEMA
        self.data["updated_at"] = now()
        cells = dict(sorted(self.data["cells"].items()))
        self.data["cells"] = cells
        atomic_write_text(self.path, json.dumps(self.data, indent=1, sort_keys=False) + "\n")

    def save(self) -> None:
        with self._lock:
            self._save()
