"""The compatibility matrix: which plugin versions work with which Python and companions.

``nox -s compat`` (``puffer matrix run``) builds it; ``puffer matrix show`` prints it;
``puffer matrix render`` rewrites its views; ``puffer matrix discover`` (``run --discover``)
follows the package index. The command group is :mod:`puffer_core.cli.matrix`; this package
is the library below it, and imports only the contract, the atomic writer and the plugin
manager of ``puffer_core``.

- :mod:`~puffer_core.matrix.model`: cells from each plugin's ``CompatAxes``
- :mod:`~puffer_core.matrix.follow`: what each plugin follows on the index, the cells its new releases add
- :mod:`~puffer_core.matrix.sources`: plugin discovery from source
- :mod:`~puffer_core.matrix.trees`: source trees, their hashes, and what a cell's run can import
- :mod:`~puffer_core.matrix.options`: what a run is asked to do, and how it reports
- :mod:`~puffer_core.matrix.plan`: which cells must run, and why (input hashes against results.json)
- :mod:`~puffer_core.matrix.discover`: ask the index for the followed packages' releases, keep them
- :mod:`~puffer_core.matrix.index_config`: which indexes (``--index``, else pip's and uv's settings)
- :mod:`~puffer_core.matrix.simple_index`: one project's files from a simple index (PEP 691 JSON, PEP 503 HTML)
- :mod:`~puffer_core.matrix.releases`: its final releases, and which CPython versions each installs on
- :mod:`~puffer_core.matrix.discovered`: discovered.json, what discovery found
- :mod:`~puffer_core.matrix.runner`: every selected cell, ``--jobs`` at a time, then the common set
- :mod:`~puffer_core.matrix.job`: one fresh uv venv: install, then the smoke run
  (:mod:`puffer_core.testing.smoke`, run by name inside the venv, never imported here)
- :mod:`~puffer_core.matrix.wheels`: wheels of the core and the plugins, built once per source hash
- :mod:`~puffer_core.matrix.processes`: the commands in flight, with deadlines and interrupts
- :mod:`~puffer_core.matrix.environment`: the allowlisted environment cells run with (``--pass-env``)
- :mod:`~puffer_core.matrix.logs`: the telling line of a failed step's output
- :mod:`~puffer_core.matrix.store`: results.json, written atomically after every cell
- :mod:`~puffer_core.matrix.common`: choosing the ``common`` set; constraints-common.txt
- :mod:`~puffer_core.matrix.joint`: the common set's joint cell
- :mod:`~puffer_core.matrix.views`: README.md and index.html
- :mod:`~puffer_core.matrix.uv`, :mod:`~puffer_core.matrix.pyproject`: finding uv, reading pyproject.toml
  (PufferTank uses both too)

Nothing here imports an environment package.
"""

from __future__ import annotations

from puffer_core.matrix.model import DEFAULT_PYTHON, OUTCOMES, Cell, cells_for

__all__ = ["DEFAULT_PYTHON", "OUTCOMES", "Cell", "cells_for"]
