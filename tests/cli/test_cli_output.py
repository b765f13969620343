"""Output that reads anywhere: on a pipe the CLI's tables are plain aligned columns at full width."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from optional import require
from plugin_site import run_puffer, write_plugin
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from puffer_core.cli.tables import plain_lines, print_markdown, print_table

ROOT = Path(__file__).resolve().parents[2]
BOX = re.compile(r"[\u2500-\u257f]")  # box drawing: ─ │ ┃ ━ ┏ ┡ └ …
ANSI = "\x1b["
LONG_NAME = "an_environment_whose_name_alone_is_longer_than_a_narrow_terminal_allows_on_one_line"
LONG_DESCRIPTION = "a description " + "that keeps going " * 8 + "until the very end"
WIDE = f'''
import puffer_core
from puffer_core import EnvSpec

def _make():
    import gymnasium
    return gymnasium.make("CartPole-v1")

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("wide/{LONG_NAME}", _make, description="{LONG_DESCRIPTION}")]
'''


# -- helpers ---------------------------------------------------------------------------------


def puffer_plain(site: Path | None, *args: str) -> list[str]:
    """Run `puffer ARGS` with stdout a pipe; its lines, checked to be plain text."""
    proc = run_puffer(site, *args)
    assert proc.returncode == 0, proc.stderr
    assert not BOX.search(proc.stdout), proc.stdout
    assert ANSI not in proc.stdout
    return proc.stdout.splitlines()


def at(line: str, offset: int) -> str:
    """What ``line`` shows from display column ``offset`` on (wide characters count 2)."""
    width = 0
    for index, char in enumerate(line):
        if width >= offset:
            return line[index:]
        width += cell_len(char)
    return ""


def start(line: str, text: str) -> int:
    """The display column where ``text`` starts in ``line``."""
    return cell_len(line[: line.index(text)])


def end(line: str, text: str) -> int:
    """The display column just after ``text`` in ``line``."""
    return start(line, text) + cell_len(text)


def cells_start_under(header: str, rows: list[str], names: list[str]) -> None:
    """Each row has a cell starting exactly at each left-justified column's header offset."""
    for name in names:
        offset = start(header, name)
        for row in rows:
            assert row[:offset] == "" or at(row, offset - 1).startswith(" "), (name, row)
            assert not at(row, offset).startswith(" "), (name, row)


def cells_end_under(header: str, rows: list[str], names: list[str]) -> None:
    """Each row has a cell ending exactly where each right-justified column's header ends."""
    for name in names:
        offset = end(header, name)
        for row in rows:
            assert not at(row, offset - 1).startswith(" "), (name, row)
            assert at(row, offset)[:1] in ("", " "), (name, row)


# -- the commands, through a pipe ------------------------------------------------------------


@pytest.fixture
def wide_site(site):
    write_plugin(site, "wide", WIDE)
    return site


def test_plugins_on_a_pipe_is_one_aligned_line_per_plugin(wide_site):
    lines = puffer_plain(wide_site, "plugins")
    plugins = json.loads(run_puffer(wide_site, "plugins", "--json").stdout)["plugins"]
    header, body = lines[1], lines[2 : 2 + len(plugins)]
    assert lines[0] == "Puffer plugins" and header.split() == ["plugin", "status", "version", "from", "hooks", "envs"]
    for plugin, line in zip(plugins, body):
        assert line.startswith(plugin["name"] + " ")
        assert at(line, start(header, "status")).startswith(plugin["status"] + " ")
    cells_start_under(header, body, ["status", "version", "from", "hooks", "envs"])
    wide = next(line for line in body if line.startswith("wide "))
    assert "puffer-plugin-wide" in wide and wide.endswith(" 1")


@pytest.mark.slow
def test_bench_on_a_pipe_keeps_numbers_right_aligned():
    # FrozenLake-v1: an id only gymnasium registers (bench takes any env id).
    lines = puffer_plain(None, "bench", "FrozenLake-v1", "--seconds", "0.1", "--no-peers", "--no-adapters")
    assert lines[0] == "puffer bench FrozenLake-v1"
    header, body = lines[1], lines[2:]
    assert header.startswith("configuration ") and header.endswith("vs PufferLib")
    assert len(body) >= 5 and all(not line.startswith(" ") for line in body)
    cells_end_under(header, body, ["workers", "batch", "steps/s"])
    cells_end_under(header, [line for line in body if "×" in line], ["vs raw", "vs Serial"])
    assert any("check_actions=True (" in line and "of the time)" in line for line in body)


@pytest.mark.slow
def test_autotune_on_a_pipe_is_aligned_with_its_summary_after():
    lines = puffer_plain(None, "autotune", "classic/cartpole", "--seconds", "1")
    assert lines[0].startswith("puffer autotune classic/cartpole (")
    header = lines[1]
    body = [line for line in lines[2:] if line.startswith(("serial ", "multiprocessing "))]
    assert header.split() == ["backend", "workers", "batch", "steps/s", "vs", "best", "RAM/env", "MB", "resets"]
    assert len(body) >= 3 and lines[2 + len(body)].startswith(f"{len(body)} settings × ")
    cells_end_under(header, body, ["workers", "batch", "steps/s", "vs best", "RAM/env MB", "resets"])
    assert lines[-1].startswith('puffer_core.vector.make("classic/cartpole"')


@pytest.mark.slow
def test_bench_uneven_on_a_pipe_keeps_its_long_title_on_one_line():
    lines = puffer_plain(None, "bench", "--uneven", "--seconds", "0.1")
    assert lines[0].startswith("Uneven cores: half the workers") and "interleaved rounds" in lines[0]
    header, body = lines[1], lines[2:]
    names = ["workers", "envs", "async batch", "sync steps/s", "async steps/s", "async / sync", "ideal"]
    assert len(body) == 2 and body[0].startswith("2 (1 slow)")
    cells_end_under(header, body, names)


def test_check_on_a_pipe_prints_one_line_per_check():
    lines = puffer_plain(None, "check", "classic/cartpole")
    assert len(lines) >= 5 and re.fullmatch(r"\d+ passed, 0 failed", lines[-1])
    for line in lines[:-1]:
        assert line[2:].startswith("classic/cartpole: "), line


def test_matrix_show_on_a_pipe_is_one_aligned_line_per_row(tmp_path):
    shutil.copy(ROOT / "compat_matrix" / "results.json", tmp_path / "results.json")
    lines = puffer_plain(None, "matrix", "show", "--out", str(tmp_path))
    headers = [index for index, line in enumerate(lines) if "(pins)  Python" in line]
    assert headers
    for index in headers:
        header = lines[index]
        package = header.split(" (pins)")[0]
        assert lines[index - 1].endswith(f" — {package}")
        body = []
        for line in lines[index + 1 :]:
            if not line.startswith(package + " "):
                break
            body.append(line)
        assert body, header
        cells_start_under(header, body, re.findall(r"Python \d+\.\d+", header))
    assert any(line.startswith("common set (Python ") and line.endswith(")") for line in lines)


# -- the helper ------------------------------------------------------------------------------


def sample_table() -> Table:
    table = Table(title="[bold]Sample[/] table")
    table.add_column("name")
    table.add_column("count", justify="right")
    table.add_column("note")
    table.add_row("[green]first[/]", "7", "a note " * 20)
    table.add_row(Text("second\nline two"), "1234", "")
    return table


def test_plain_lines_strip_markup_keep_rows_whole_and_justify():
    lines = plain_lines(sample_table())
    assert lines == [
        "Sample table",
        "name" + " " * 12 + "  count  note",
        "first" + " " * 11 + "      7  " + ("a note " * 20).strip(),
        "second; line two   1234",
    ]


def test_print_table_on_a_terminal_draws_the_rich_box():
    out = io.StringIO()
    print_table(Console(file=out, force_terminal=True, width=60), sample_table())
    text = out.getvalue()
    assert "┏" in text and "┃" in text and ANSI in text
    assert max(cell_len(line) for line in Text.from_ansi(text).plain.splitlines()) <= 60


def test_print_table_elsewhere_prints_plain_lines_at_full_width():
    out = io.StringIO()
    print_table(Console(file=out, width=40), sample_table())
    assert out.getvalue().splitlines() == plain_lines(sample_table())
    assert not BOX.search(out.getvalue()) and ANSI not in out.getvalue()


def test_print_markdown_is_the_source_elsewhere_and_rendered_on_a_terminal():
    document = "# Title\n\n| a | b |\n| --- | --- |\n| " + "x" * 90 + " | 1 |\n"
    plain = io.StringIO()
    print_markdown(Console(file=plain, width=40), document)
    assert plain.getvalue() == document
    terminal = io.StringIO()
    print_markdown(Console(file=terminal, force_terminal=True, width=40), document)
    assert "# Title" not in terminal.getvalue() and ANSI in terminal.getvalue()


def test_run_summary_on_a_pipe_is_never_wrapped(site):
    write_plugin(site, "wide", WIDE)
    env_id = f"wide/{LONG_NAME}"
    lines = puffer_plain(site, "run", env_id, "--steps", "100", "--num-envs", "2")
    summary = next(line for line in lines if line.startswith(env_id))
    assert re.search(r": 100 steps in .* = .* steps/s \(serial, 2 envs, 1 worker, batch 2\)$", summary), lines
    assert len(lines) == 2 and "episodes finished; mean episode_length" in lines[1], lines  # each one line


def in_a_terminal(*args: str, timeout: float = 300) -> str:
    """What `puffer ARGS` writes to a terminal (a pseudo-terminal 120 columns wide), ANSI codes and all."""
    import os
    import pty
    import subprocess
    import sys
    import time

    from plugin_site import puffer_env

    main, child = pty.openpty()
    env = {**puffer_env(None), "COLUMNS": "120", "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "puffer_core.cli.main", *args], stdin=subprocess.DEVNULL,
                            stdout=child, stderr=child, env=env)  # fmt: skip
    os.close(child)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child's end is closed, it has exited
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main)
        proc.kill() if proc.poll() is None else None
        proc.wait()
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def test_a_run_in_a_terminal_draws_its_bar_with_the_steps_the_rate_and_the_time_left():
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", in_a_terminal("run", "classic/cartpole", "--steps", "100000",
                                                              "--num-envs", "2"))  # fmt: skip
    bar = r"classic/cartpole [━╸╺ ]+ \d+/100000 steps · [\d,]+ steps/s \d:\d\d:\d\d eta \d:\d\d:\d\d"
    assert re.search(bar, text), text[-2000:]
    assert "classic/cartpole: 100,000 steps in" in text  # the summary after the bar


def test_training_in_a_terminal_draws_its_bar_with_the_mean_return(tmp_path):
    require("torch")
    text = in_a_terminal("train", "classic/cartpole", "--steps", "4096", "--out", str(tmp_path / "run"))
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert "device: cpu" in text
    bar = r"classic/cartpole [━╸╺ ]+ \d+/4096 steps · [\d,–]+ steps/s · mean return \S+ \d:\d\d:\d\d eta"
    assert re.search(bar, text), text[-2000:]
    assert "4,096 steps in" in text
