"""`puffer constraints`: the versions the matrix verified together, for pip's ``-c``."""

from __future__ import annotations

import sys

import click

from puffer_core.matrix.plan import split_values
from puffer_core.matrix.shipped import constraints_for
from puffer_core.matrix.store import MatrixError
from puffer_core.specs.declarations import PYTHON_VERSION_RE

__all__ = ["constraints_cmd"]

RUNNING_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@click.command("constraints")
@click.option(
    "--python",
    "python",
    default=RUNNING_PYTHON,
    show_default="this Python",
    metavar="X.Y",
    help="The Python the set was verified on.",
)
@click.option(
    "--plugins",
    "plugins",
    multiple=True,
    metavar="A,B",
    help="Only what these plugins install (repeatable, or a,b); the others' packages are left out.",
)
def constraints_cmd(python: str, plugins: tuple[str, ...]) -> None:
    """Print the constraint set the compatibility matrix verified on a Python.

    The set pins every plugin of the matrix's common set and their companions (gymnasium,
    numpy, ...) to versions whose joint cell passed on that Python. It ships inside
    puffer-core, so no checkout is needed:

        pip install -c <(puffer constraints) puffer-plugin-nethack

    `puffer doctor` says whether what is installed now is such a set.
    """
    if not PYTHON_VERSION_RE.match(python):
        raise MatrixError(f"--python {python!r} is not a Python 3 version: write versions like 3.12")
    click.echo(constraints_for(python, split_values(plugins)), nl=False)
