"""Tables that read anywhere: rich boxes on a terminal, plain aligned columns in a log, a pipe or a file."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

__all__ = ["output_console", "plain_lines", "print_markdown", "print_table"]

GAP = "  "  # between two plain columns
LINE_JOIN = "; "  # a cell's own line breaks, in plain text (one table row stays one line)


def output_console(stderr: bool = False, **options: Any) -> Console:
    """A console for a command's output: on a terminal as rich draws it; in a log, a pipe or a
    file no line is ever wrapped (rich would break it at 80 columns there, mid-sentence)."""
    console = Console(stderr=stderr, **options)
    if not console.is_terminal:
        console.soft_wrap = True
    return console


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` as rich draws it on a terminal, else as plain aligned columns at full width."""
    if _draws_boxes(console):
        console.print(table)
        return
    for line in plain_lines(table):
        console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)


def print_markdown(console: Console, text: str) -> None:
    """Print Markdown ``text`` rendered on a terminal, else as its source (which reads as plain text)."""
    if _draws_boxes(console):
        from rich.markdown import Markdown

        console.print(Markdown(text))
        return
    console.print(text.rstrip("\n"), markup=False, highlight=False, emoji=False, soft_wrap=True)


def plain_lines(table: Table) -> list[str]:
    """The title (if any), the header and one line per row, columns aligned, no markup and no box."""
    columns = table.columns
    rows = [[plain_text(cell) for cell in column.cells] for column in columns]
    body = [list(row) for row in zip(*rows)]
    header = [plain_text(column.header) for column in columns]
    shown = [header, *body] if table.show_header else body
    widths = [max((cell_len(row[i]) for row in shown), default=0) for i in range(len(columns))]
    lines = [_join(row, columns, widths) for row in shown]
    title = [plain_text(table.title)] if table.title else []
    caption = [plain_text(table.caption)] if table.caption else []
    return title + lines + caption


def plain_text(cell: Any) -> str:
    """A cell as one line of plain text: markup of a str cell applied, styles dropped."""
    if cell is None:
        return ""
    text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
    return LINE_JOIN.join(part.strip() for part in text.splitlines() if part.strip())


def _draws_boxes(console: Console) -> bool:
    return console.is_terminal or console.is_jupyter


def _join(cells: list[str], columns: list[Column], widths: list[int]) -> str:
    """One plain line: each cell padded to its column's width on the side its justify says."""
    return GAP.join(_pad(cell, column.justify, width) for cell, column, width in zip(cells, columns, widths)).rstrip()


def _pad(cell: str, justify: str, width: int) -> str:
    space = width - cell_len(cell)
    if justify == "right":
        return " " * space + cell
    if justify == "center":
        return " " * (space // 2) + cell + " " * (space - space // 2)
    return cell + " " * space
