"""`puffer envs`: every env grouped under its plugin, each line within the terminal's width.

Why an env cannot be made here (a missing package and its install hint) is said once per
plugin, above its envs, not on each of them: DeepMind Lab's 44 levels share one hint.
``--json`` keeps every field whole.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len, set_cell_size

from puffer_core.env.environments import missing_requirements
from puffer_core.plugins import PluginSet
from puffer_core.plugins.gymnasium_ids import registered_ids

__all__ = ["env_rows", "gymnasium_lines", "gymnasium_rows", "listing_lines", "listing_width"]

#: Narrower than this, lines would hold nothing readable: they may run over instead.
MIN_WIDTH = 40
#: ASCII only: a byte-counting ``awk 'length > 80'`` must agree that the lines fit.
UNAVAILABLE = "x"
ELLIPSIS = "..."
#: A description gets at most this many lines, and goes under its id where fewer columns than
#: MIN_DESCRIPTION are left beside it.
DESCRIPTION_LINES = 2
MIN_DESCRIPTION = 24
#: How many ids a note names before it counts the rest.
NAMED_IDS = 3


def listing_width() -> int:
    """The width to fit: COLUMNS, else the terminal's, else 80 (a pipe or a file)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def env_rows(plugins: PluginSet, plugin_name: str | None = None) -> list[dict[str, Any]]:
    """One dict per env (of ``plugin_name`` only, when given): id, plugin, api, availability, why not, hint."""
    rows = []
    for env_id in plugins.env_ids():
        spec = plugins.env_specs[env_id]
        owner = plugins.env_owner[env_id]
        if plugin_name is not None and owner != plugin_name:
            continue
        missing = missing_requirements(spec)
        hint = spec.install_hint or ("pip install " + " ".join(missing) if missing else "")
        if env_id in plugins.duplicates:
            available, note = False, "declared by " + " and ".join(plugins.duplicates[env_id])
        elif missing:
            available, note = False, f"needs {', '.join(missing)}: {hint}"
        else:
            available, note = True, ""
        rows.append(
            {
                "id": env_id,
                "plugin": owner,
                "api": spec.api,
                "available": available,
                "note": note,
                "description": spec.description,
                "needs": missing,
                "install_hint": spec.install_hint,
                "native": spec.batch_creator is not None,
                "aliases": list(spec.aliases),
            }
        )
    return rows


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` display columns, ending in an ellipsis when cut."""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, max(width - len(ELLIPSIS), 0)).rstrip() + ELLIPSIS


def wrapped(text: str, width: int, indent: str) -> list[str]:
    """``text`` wrapped to ``width``, every line indented by ``indent`` (long words broken)."""
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False)


def _header(plugin: str, info: Any, rows: list[dict[str, Any]]) -> str:
    where = "built in" if info is None or info.distribution is None else f"{info.distribution} {info.version}"
    count = len(rows)
    made = sum(row["available"] for row in rows)
    availability = "" if made == count else ", none available here" if made == 0 else f", {made} available here"
    native = sum(row.get("native", False) for row in rows)
    batches = "" if not native else ", native batches" if native == count else f", {native} with native batches"
    return f"{plugin} ({where}): {count} env{'s' * (count != 1)}{availability}{batches}"


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:NAMED_IDS])
    return shown + (f" and {len(ids) - NAMED_IDS} more" if len(ids) > NAMED_IDS else "")


def _notes(rows: list[dict[str, Any]], width: int) -> list[str]:
    """Each distinct reason an env of the plugin cannot be made here, once, with the envs it concerns."""
    by_note: dict[str, list[str]] = {}
    for row in rows:
        if not row["available"]:
            by_note.setdefault(row["note"], []).append(row["id"])
    lines = []
    for note, ids in by_note.items():
        which = "" if len(ids) == len(rows) else f"{UNAVAILABLE} {_ids(ids)}: "
        lines += wrapped(which + note, width, "  ")
    return lines


def _description_lines(text: str, width: int, most: int) -> list[str]:
    """``text`` wrapped to ``width``, at most ``most`` lines, the last cut with an ellipsis when more remain."""
    lines = textwrap.wrap(text, width, break_on_hyphens=False) or [""]
    if len(lines) > most:
        lines = [*lines[: most - 1], fit(" ".join(lines[most - 1 :]), width)]
    return lines


def _env_lines(rows: list[dict[str, Any]], width: int) -> list[str]:
    """One line per env (two where its description runs long): mark, id, API, description."""
    id_width = min(max(cell_len(row["id"]) for row in rows), width // 2)
    api_width = max(cell_len(row["api"]) for row in rows)
    # Marks tell the envs a note concerns apart; where none or all can be made, the header says it.
    made = [row["available"] for row in rows]
    marked = any(made) and not all(made)
    lines = []
    for row in rows:
        mark = ("  " if row["available"] else UNAVAILABLE + " ") if marked else ""
        start = f"  {mark}{fit(row['id'], id_width):<{id_width}}  {row['api']:<{api_width}}  "
        room = width - cell_len(start)
        if room >= MIN_DESCRIPTION:
            first, *rest = _description_lines(row["description"], room, DESCRIPTION_LINES)
            lines += [start + first, *(" " * cell_len(start) + line for line in rest)]
        else:  # too narrow beside the id: the description goes under it
            lines.append(start.rstrip())
            lines += ["      " + line for line in _description_lines(row["description"], width - 6, DESCRIPTION_LINES)]
    return [line.rstrip() for line in lines]


def listing_lines(rows: list[dict[str, Any]], plugins: PluginSet, width: int, extra: Iterable[str] = ()) -> list[str]:
    """The listing: per plugin a header, its reasons envs are unavailable, one line per env; then ``extra``
    (failed plugins, warnings), every line at most ``width`` columns."""
    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_plugin.setdefault(row["plugin"], []).append(row)
    lines: list[str] = []
    for plugin, plugin_rows in by_plugin.items():
        if lines:
            lines.append("")
        lines.append(fit(_header(plugin, plugins.plugins.get(plugin), plugin_rows), width))
        lines += _notes(plugin_rows, width)
        lines += _env_lines(plugin_rows, width)
    for line in extra:
        lines += wrapped(line, width, "")
    return lines


def gymnasium_rows(plugins: PluginSet) -> list[dict[str, str]]:
    """The ids gymnasium registers that no plugin declares or has as an alias: id and entry point each."""
    covered = set(plugins.env_specs) | {alias for spec in plugins.env_specs.values() for alias in spec.aliases}
    return [{"id": env_id, "entry_point": where} for env_id, where in registered_ids().items() if env_id not in covered]


def gymnasium_lines(rows: list[dict[str, str]], width: int) -> list[str]:
    """A header naming gymnasium's version, then one line per id: the id and its entry point."""
    import gymnasium

    count = f"{len(rows)} registered id{'s' * (len(rows) != 1)} no plugin covers"
    lines = [fit(f"gymnasium {gymnasium.__version__}: {count} (puffer run ID makes one)", width)]
    id_width = min(max((cell_len(row["id"]) for row in rows), default=0), width // 2)
    for row in rows:
        lines.append(fit(f"  {fit(row['id'], id_width):<{id_width}}  {row['entry_point']}", width).rstrip())
    return lines
