"""What a layer is built from, as one sha256: its label ``org.puffer.tank.inputs``.

Two builds with the same fingerprint make the same layer, so ``puffer tank build
--from-registry REG --pins FILE`` takes the pushed layer a pins file maps that fingerprint to
(by its digest) instead of building it. Anyone can compute a fingerprint from the public
checkout, so the label is information, never proof of a layer's content. It covers:

- the layer's build context: its Dockerfile and every file it copies, as the reproducible
  tar :mod:`~puffer_core.tank.image.build_context` makes (the same files give the same bytes);
- the build arguments that change what is built: layer 1's base image (resolved to a
  digest or an image id), ``TORCH``, the image id of the layer below (``BASE``), and any
  ``--build-arg``;
- the files served to the build whose content matters (``--lock``'s constraints and
  hashes), by their sha256: their loopback URLs change with every build;
- the engine's platform (``linux/amd64``): the same inputs make other bytes elsewhere.

Not covered, because they change how files are fetched, not which: this machine's pip
index settings and proxies (:mod:`~puffer_core.tank.image.build_args`, also when given as
``--build-arg``) and the CA bundle (``--ca-cert``, never stored in the image).

Each layer also names the image id it was built on (``org.puffer.tank.below``), so
``puffer tank push`` finds the two layers under a final image.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from puffer_core.tank.image.build_args import PIP_ARGS, PROXY_ARGS

__all__ = ["BELOW_LABEL", "INPUTS_LABEL", "NOT_CONTENT_ARGS", "engine_platform", "layer_inputs"]

INPUTS_LABEL = "org.puffer.tank.inputs"
BELOW_LABEL = "org.puffer.tank.below"
#: Build arguments that do not change what a layer holds.
NOT_CONTENT_ARGS = frozenset({*PIP_ARGS, *PROXY_ARGS, *(name.lower() for name in PROXY_ARGS), "PUFFER_CA_URL"})
#: Bumped when what the fingerprint covers changes, so an old tag is never taken for a new one.
FORMAT = 1


def layer_inputs(
    stage: str, context: bytes, args: Mapping[str, str], served: Mapping[str, bytes], platform: str
) -> str:
    """The sha256 naming what layer ``stage`` is built from (see the module's docstring).

    ``args``: the stage's build arguments (those in :data:`NOT_CONTENT_ARGS`, and the URL
    arguments of ``served`` files, are left out); ``served``: {URL argument: the file's bytes}.
    """
    record = {
        "format": FORMAT,
        "stage": stage,
        "platform": platform,
        "context": hashlib.sha256(context).hexdigest(),
        "args": {key: args[key] for key in sorted(args) if key not in NOT_CONTENT_ARGS and key not in served},
        "served": {key: hashlib.sha256(served[key]).hexdigest() for key in sorted(served)},
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def engine_platform(client: Any) -> str:
    """``os/arch`` of the engine's images, e.g. ``linux/amd64``."""
    version = client.version()
    return f"{version.get('Os', 'linux')}/{version.get('Arch', 'unknown')}"
