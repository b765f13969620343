"""Reading a ``pyproject.toml``: tomllib, tomli, or a small fallback for the tables the matrix and tank read."""

from __future__ import annotations

import pathlib
import re
from typing import Any

__all__ = ["read_pyproject"]


def read_pyproject(path: pathlib.Path) -> dict[str, Any]:
    """Parse a pyproject.toml (tomllib, tomli, or a small fallback for the tables we read)."""
    text = path.read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            return _tiny_toml(text)
    return tomllib.loads(text)


def _tiny_toml(text: str) -> dict[str, Any]:
    """Just enough TOML for ``[project]`` name/version and string-valued tables (Python 3.10 without tomli)."""
    data: dict[str, Any] = {}
    table: dict[str, Any] = data
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.strip().startswith('"') else raw.strip()
        header = re.match(r"^\[([^\[\]]+)\]$", line)
        if header:
            table = data
            for part in header.group(1).split("."):
                table = table.setdefault(part.strip().strip('"'), {})
            continue
        pair = re.match(r'^("?[\w.-]+"?)\s*=\s*"([^"]*)"$', line)
        if pair:
            table[pair.group(1).strip('"')] = pair.group(2)
    return data
