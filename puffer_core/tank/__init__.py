"""PufferTank: the project's 3-layer Docker image, rendered and built from the plugins.

- layer 1, ``tank/Dockerfile.base``: OS, Python 3.11 (``/opt/venv``), PyTorch, tools;
- layer 2, ``tank/Dockerfile.envs``: GENERATED here (:mod:`puffer_core.tank.render`) from
  every plugin's ``DockerLayer`` and the compatibility matrix's common constraint set, whose
  hash-locked form ``tank/requirements-envs.txt`` (:mod:`puffer_core.tank.hashlock`,
  ``puffer tank compile``) it installs with ``pip install --require-hashes``;
- layer 3, ``tank/Dockerfile``: puffer-core and the plugins, shell, editor, entrypoint.

- :mod:`~puffer_core.tank.render`: layer 2's Dockerfile; :mod:`~puffer_core.tank.selection`:
  what a render or a build is made from; :mod:`~puffer_core.tank.hashlock`: the hash-locked set
- :mod:`~puffer_core.tank.build`: the three layers through the docker SDK, on the engine
  :mod:`~puffer_core.tank.engine` connects to, each sent what
  :mod:`~puffer_core.tank.build_context` packs, layer 1 from the image
  :mod:`~puffer_core.tank.base_image` pins, with this machine's pip and proxy settings
  (:mod:`~puffer_core.tank.build_args`) and the CA bundle or lock
  :mod:`~puffer_core.tank.file_server` serves on the loopback
- :mod:`~puffer_core.tank.container`: one's own container (no capabilities, no new privileges);
  :mod:`~puffer_core.tank.login`: a box's login shell, each user's long-lived container
  (the docker CLI and the standard library only: it runs on every ssh command)
- :mod:`~puffer_core.tank.lock`: the image's lock (versions and file hashes);
  :mod:`~puffer_core.tank.verify`: layer 3's check that every plugin loads
- images to and from a registry: :mod:`~puffer_core.tank.registry` (the repository's name,
  the tags, is it there), :mod:`~puffer_core.tank.transfer` (one tag through the engine),
  :mod:`~puffer_core.tank.push`, :mod:`~puffer_core.tank.pull` (checked against its tag),
  :mod:`~puffer_core.tank.inputs` (what a layer is built from, for ``build --from-registry``)

The ``puffer tank`` command group is :mod:`puffer_core.cli.tank`. This package imports only
the contract, the atomic writer, the plugin manager and the matrix's uv and pyproject
readers of ``puffer_core``; nothing here imports docker until a command talks to an engine.
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
