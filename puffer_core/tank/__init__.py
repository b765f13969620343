"""PufferTank: the project's 3-layer Docker image, rendered and built from the plugins.

- layer 1, ``tank/Dockerfile.base``: OS, Python 3.11 (``/opt/venv``), PyTorch, tools;
- layer 2, ``tank/Dockerfile.envs``: GENERATED here (:mod:`puffer_core.tank.render`) from
  every plugin's ``DockerLayer`` and the compatibility matrix's common constraint set, whose
  hash-locked form ``tank/requirements-envs.txt`` (:mod:`puffer_core.tank.hashlock`,
  ``puffer tank compile``) it installs with ``pip install --require-hashes``;
- layer 3, ``tank/Dockerfile``: puffer-core and the plugins, shell, editor, entrypoint.

:mod:`puffer_core.tank.build` builds them through the docker SDK; :mod:`puffer_core.tank.cli`
is the ``puffer tank`` command group; :mod:`puffer_core.tank.container` starts one's own
container (no capabilities, no new privileges); :mod:`puffer_core.tank.lock` writes and
reads the image's lock (versions and file hashes). Nothing here imports docker until a
build starts.
"""

from __future__ import annotations

from puffer_core.tank.errors import BuildError, ConstraintsError, NoEngineError, TankError
from puffer_core.tank.render import Constraints, load_constraints, render_envs, select_layers

__all__ = [
    "BuildError",
    "Constraints",
    "ConstraintsError",
    "NoEngineError",
    "TankError",
    "load_constraints",
    "render_envs",
    "select_layers",
]
