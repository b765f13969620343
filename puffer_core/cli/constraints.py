"""`puffer constraints`: the versions the matrix verified together, for pip's ``-c``."""

from __future__ import annotations

import click

from puffer_core.matrix.plan import check_python_option, split_values
from puffer_core.matrix.shipped import constraints_for, running_python

__all__ = ["constraints_cmd"]


@click.command("constraints")
@click.option(
    "--python",
    "python",
    default=running_python(),
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
    click.echo(constraints_for(check_python_option(python), split_values(plugins)), nl=False)
