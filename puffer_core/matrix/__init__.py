"""The compatibility matrix: which plugin versions work with which Python and companions.

``nox -s compat`` (or ``puffer matrix run``) builds it; ``puffer matrix show`` prints it.

- :mod:`~puffer_core.matrix.model`: cells from each plugin's ``CompatAxes``
- :mod:`~puffer_core.matrix.sources`: plugin discovery from source, source-tree hashes
- :mod:`~puffer_core.matrix.runner`: one fresh uv venv per cell, install, smoke run, record
- :mod:`~puffer_core.matrix.environment`: the allowlisted environment cells run with (``--pass-env``)
- :mod:`~puffer_core.matrix.smoke`: what runs inside a cell
- :mod:`~puffer_core.matrix.store`: results.json, written atomically after every cell
- :mod:`~puffer_core.matrix.common`: the ``common`` set and constraints-common.txt
- :mod:`~puffer_core.matrix.render`: README.md, index.html and the terminal view
- :mod:`~puffer_core.matrix.cli`: the ``puffer matrix`` command group

Nothing here imports an environment package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_PYTHON", "OUTCOMES", "Cell", "cells_for"]


def __getattr__(name: str) -> Any:
    # Lazy, so the in-cell smoke run (puffer_core.matrix.smoke) imports nothing else from here.
    if name in __all__:
        from puffer_core.matrix import model  # deferred: see above

        return getattr(model, name)
    raise AttributeError(f"module 'puffer_core.matrix' has no attribute {name!r}")
