"""``python -m puffer_core.matrix run|show``: what ``nox -s compat`` calls."""

from puffer_core.matrix.cli import main

main()
