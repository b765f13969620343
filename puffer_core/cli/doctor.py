"""`puffer doctor`: this installation against what the matrix verified; and the one-line warning
`puffer run` and `puffer train` print when the env's plugin is installed in a known-bad set.

Both read the verified.json shipped in puffer-core (``puffer_core.matrix.shipped``); the hidden
variable PUFFER_VERIFIED_DIR points them at another folder holding one (the tests' own matrix
results).
"""

from __future__ import annotations

import os
import pathlib
import platform
import sys

import click
from rich.markup import escape
from rich.table import Table

import puffer_core
from puffer_core.cli.errors import err_console
from puffer_core.cli.output import console, print_json
from puffer_core.cli.tables import print_table
from puffer_core.matrix import doctor
from puffer_core.matrix.shipped import SHIPPED_DIR, load_verified, running_python
from puffer_core.matrix.store import MatrixError
from puffer_core.plugins import FAILED, LOADED, get_plugins

__all__ = ["VERIFIED_DIR_ENV", "doctor_cmd", "warn_if_known_bad"]

VERIFIED_DIR_ENV = "PUFFER_VERIFIED_DIR"
INSTALLED = (LOADED, FAILED)
MARKS = {
    doctor.VERIFIED: "[green]✓[/]",
    doctor.NOT_VERIFIED: "[yellow]![/]",
    doctor.KNOWN_BAD: "[red]✗[/]",
    doctor.NOT_INSTALLED: "[dim]·[/]",
    doctor.NOT_USED: "[dim]·[/]",
    doctor.IN_TANK: "[cyan]○[/]",
}

DOCTOR_HELP = """Compare this installation with what the compatibility matrix verified.

Lists the installed versions of Python, puffer-core, every installed plugin and every
package the matrix has axes for (numpy, gymnasium, shimmy, pettingzoo, gym and each
plugin's package), each marked:

\b
  ✓ verified      a plugin: a matrix cell passed on this Python with exactly these versions
                  of its pins; a package: a passing cell on this Python ran this version;
                  Python: its common constraint set passed (`puffer constraints` prints it)
  ! not verified  no cell ran this combination: the nearest verified set is named with
                  the command that installs it, e.g.
                  pip install -c <(puffer constraints) nle gymnasium
  ✗ known bad     one of the plugin's known-bad rules matches, or a cell with exactly
                  these versions failed on this Python: the matrix's reason is shown
  ○ in PufferTank  a plugin whose package no index serves (DeepMind Lab):
                  only PufferTank's image has it, so it is not judged here
  · not installed, or not used by the installed plugins: not judged

Exits 0 only when everything judged is verified, 1 otherwise. --json prints the same
report for scripts: {"schema", "ok", "python", "puffer_core", "plugins": [...],
"packages": [...]}, each entry {"name", "version", "verdict", "reason", "fix", "cell",
"nearest", "installed"}.
"""


def _folder() -> pathlib.Path:
    return pathlib.Path(os.environ.get(VERIFIED_DIR_ENV) or SHIPPED_DIR)


@click.command("doctor", help=DOCTOR_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor_cmd(as_json: bool) -> None:
    data = load_verified(_folder())  # a MatrixError is the group's one-line message
    # Plugins installed from entry points (loaded or failed; not those disabled or not selected):
    # the matrix's are found by their distributions anyway, the others are not verified.
    loaded = [n for n, info in get_plugins().plugins.items() if info.source != "builtin" and info.status in INSTALLED]
    report = doctor.diagnose(running_python(), doctor.installed_versions(), data, puffer_core.__version__, loaded)
    if as_json:
        print_json(report.to_json())
    else:
        _print_report(report)
    if not report.ok:
        sys.exit(1)


def _what(finding: doctor.Finding, kind: str) -> str:
    if kind == "python":
        return f"Python {platform.python_version()}"
    if kind != "plugin":
        return f"{finding.name} {finding.version or '-'}"
    what = f"plugin {finding.name} {finding.version or '(built in)'}"
    if finding.pins:
        what += " (" + ", ".join(f"{name} {version or '-'}" for name, version in finding.pins.items()) + ")"
    return what


def _print_report(report: doctor.Report) -> None:
    """A table of every finding (mark, what, verdict and why), then the fixes, then a summary."""
    table = Table(title="puffer doctor: this installation against the compatibility matrix")
    for column in ("", "installed", "verdict", "why"):
        table.add_column(column, overflow="fold")
    rows = [(report.python, "python"), (report.core, "core")]
    rows += [(f, "plugin") for f in report.plugins] + [(f, "package") for f in report.packages]
    for finding, kind in rows:
        table.add_row(MARKS[finding.verdict], escape(_what(finding, kind)), finding.verdict, escape(finding.reason))
    print_table(console, table)
    fixes = [f for f in report.findings if f.fails and f.fix]
    for finding in fixes:
        console.print(f"fix {finding.name}: {finding.fix}", highlight=False, markup=False, soft_wrap=True)
    failing = [f for f in report.findings if f.fails]
    if not failing:
        console.print("[bold green]everything installed is verified[/]", highlight=False)
        return
    counts = {
        verdict: sum(f.verdict == verdict for f in failing) for verdict in (doctor.KNOWN_BAD, doctor.NOT_VERIFIED)
    }
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n)
    console.print(f"[bold red]{summary}[/]", highlight=False)


def warn_if_known_bad(env_id: str) -> None:
    """One line on stderr when ``env_id``'s plugin is installed in a set the matrix knows is bad;
    nothing when it is verified or unknown, nor when the env or verified.json cannot be found
    (the command itself reports an unknown env). Reads verified.json once, looks up a few versions."""
    owner = get_plugins().env_owner.get(env_id)
    if owner is None:
        return
    try:
        data = load_verified(_folder())
    except MatrixError:
        return
    installed = doctor.installed_versions(doctor.needed_names(owner, data))
    line = doctor.known_bad_warning(owner, running_python(), installed, data)
    if line:
        err_console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)
