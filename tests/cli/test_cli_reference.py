"""docs/cli.md is what ``python -m puffer_core.cli.reference`` makes of the `puffer` commands now.

A new command, option or default without a regenerated page fails here; so does a page that
leaves out an option or shows a default the command no longer has. The commands are walked
from the click group itself, not from the generator, and each option is looked up in the
section of its command.
"""

from __future__ import annotations

import html
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from puffer_core.cli import reference
from puffer_core.cli.main import cli, run_cmd as run_command

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cli.md"


def every_command(
    command: click.Command = cli, path: tuple[str, ...] = ("puffer",), parent: click.Context | None = None
) -> list[tuple[str, click.Context]]:
    """Every command and subcommand of ``puffer`` with a context as click makes it (settings inherited)."""
    ctx = click.Context(command, info_name=path[-1], parent=parent, **command.context_settings)
    found = [(" ".join(path), ctx)]
    for name, sub in getattr(command, "commands", {}).items():
        found += every_command(sub, (*path, name), ctx)
    return found


def section(page: str, path: str) -> str:
    """The part of ``page`` under the heading of command ``path``, up to the next command's heading."""
    match = re.search(rf"^#{{2,3}} `{re.escape(path)}`\n(.*?)(?=^#{{2,3}} |<!-- END GENERATED)", page, re.M | re.S)
    assert match, f"docs/cli.md has no section for `{path}`: run python -m puffer_core.cli.reference"
    return match.group(1)


def plain(markdown: str) -> str:
    """A table row as text: escapes and entities undone."""
    text = re.sub(r"<code>(.*?)</code>", r"`\1`", re.sub(r"\\(.)", r"\1", markdown))
    return html.unescape(text)


def expected_default(option: click.Option, ctx: click.Context) -> str | None:
    """The default `--help` shows for ``option``: click's, else the one its help text states."""
    shown = option.get_help_extra(ctx).get("default")
    stated = re.search(r"\[default: (.+)\]\s*\Z", option.help or "", re.S)
    if shown is None and stated:
        return " ".join(stated.group(1).split())
    if shown is None and isinstance(option.default, (int, float, str)) and not option.is_flag:
        return str(option.default)
    return shown


def test_the_page_is_what_the_commands_give_now():
    text = PAGE.read_text(encoding="utf-8")
    assert text.startswith(reference.NOTICE + "\n")
    assert reference.render_page(text) == text, "docs/cli.md is stale: run python -m puffer_core.cli.reference"


@pytest.mark.parametrize("path, ctx", every_command(), ids=[path for path, _ in every_command()])
def test_every_option_appears_with_its_current_default(path, ctx):
    part = section(PAGE.read_text(encoding="utf-8"), path)
    usage = " ".join([path, *ctx.command.collect_usage_pieces(ctx)])
    assert f"```text\n{usage}\n```" in part
    first_line = inspect.cleandoc(ctx.command.help or "").splitlines()[0]
    assert " ".join(first_line.split()) in plain(part)
    rows = [line for line in part.splitlines() if line.startswith("| `-")]
    # A fresh help option: click caches one per command with the names of the first context
    # that asked (a CliRunner on `matrix` alone has no -h), and this test may not run first.
    fresh_help = click.Command("help").get_help_option(ctx)
    params = [*ctx.command.params, fresh_help]
    options = [p for p in params if isinstance(p, click.Option) and not p.hidden]
    assert len(rows) == len(options), f"`{path}`: {len(options)} options, {len(rows)} rows"
    for option, row in zip(options, rows):
        names, value, default, help_cell = (cell.strip() for cell in row.strip("|").split(" | "))
        short_first = sorted(option.opts, key=lambda opt: opt.startswith("--"))  # as the page orders them
        assert names == ", ".join(f"`{opt}`" for opt in short_first), row
        wanted = expected_default(option, ctx)
        if option.required:
            assert default == "required", row
        elif wanted is None:
            assert default == "", f"`{path} {option.opts[-1]}` has no default, the page shows {default!r}"
        else:
            assert plain(default).strip("`") == wanted, (
                f"`{path} {option.opts[-1]}`: default {wanted!r}, page {default!r}"
            )
        assert value == "flag" if option.is_flag else value.startswith(("`", "<code>")), row
        words = re.sub(r"\s*\[default: .*\Z", "", " ".join((option.help or "").split()))
        assert plain(help_cell) == words, row


def test_every_command_has_a_section_and_a_line_in_the_table():
    text = PAGE.read_text(encoding="utf-8")
    paths = [path for path, _ in every_command()]
    assert len(paths) > 25 and {"puffer matrix render", "puffer tank lock", "puffer new-plugin"} <= set(paths)
    for path in paths:
        assert f"| [{path}](#{path.replace(' ', '-')}) |" in text
        section(text, path)


def test_a_new_option_makes_the_page_stale(monkeypatch):
    text = PAGE.read_text(encoding="utf-8")
    extra = click.Option(["--brand-new"], default=7, show_default=True, type=int, help="Not there yet.")
    monkeypatch.setattr(run_command, "params", [*run_command.params, extra])
    renewed = reference.render_page(text)
    assert renewed != text
    assert "| `--brand-new` | `INTEGER` |  | Not there yet. |" not in renewed
    assert "| `--brand-new` | `INTEGER` | `7` | Not there yet. |" in section(renewed, "puffer run")


def run_reference(*args: str, columns: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "COLUMNS": columns,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.reference", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_the_check_passes_at_any_terminal_width_and_fails_on_one_line_when_stale(tmp_path):
    for columns in ("20", "300"):
        proc = run_reference("--check", columns=columns)
        assert proc.returncode == 0 and proc.stdout == proc.stderr == "", proc.stderr
    stale = tmp_path / "cli.md"
    stale.write_text(PAGE.read_text(encoding="utf-8").replace("| `10000` |", "| `5000` |", 1))
    proc = run_reference("--check", str(stale), columns="80")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr == f"error: {stale} is not what the commands give: run python -m puffer_core.cli.reference\n"
    proc = run_reference(str(stale), columns="80")  # without --check: rewritten, then current
    assert proc.returncode == 0 and stale.read_text() == PAGE.read_text(encoding="utf-8")
    stale.write_text("# no markers\n")
    proc = run_reference("--check", str(stale), columns="80")
    assert proc.returncode == 1 and proc.stderr.startswith(f"error: {stale}: the page needs one line")
    assert proc.stderr.count("\n") == 1 and stale.read_text() == "# no markers\n"


def test_help_text_becomes_literal_markdown():
    assert reference.markdown_text("a * b <x> __main__ [1] `a|b*` | c_d") == (
        "a \\* b &lt;x> \\_\\_main\\_\\_ \\[1\\] `a|b*` \\| c_d"
    )
    assert reference.markdown_text("`a|b` `c`", table=True) == "<code>a&#124;b</code> `c`"
    assert reference.markdown_text("# not a heading") == "\\# not a heading"
    assert reference.markdown_text("- not\n  a list") == "\\- not a list"
    assert reference.markdown_text("1. not a list") == "1\\. not a list"
    assert reference.help_markdown("Title.\n\n\b\n  kept  as\n  is\n\nsplit\nlines\f hidden") == [
        "Title.",
        "```text\n  kept  as\n  is\n```",
        "split lines",
    ]


def test_an_older_click_is_refused_on_one_line(monkeypatch, capsys):
    monkeypatch.delattr(click.Option, "get_help_extra")  # click 8.1 has no such method
    assert reference.main(["--check"]) == 1
    assert capsys.readouterr().err == "error: the reference is made with click 8.2 or newer: pip install -U click\n"
