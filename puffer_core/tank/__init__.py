"""PufferTank: the project's 3-layer Docker image and the shared boxes that run it, split by who runs the code.

- :mod:`~puffer_core.tank.image`: the image, built by a maintainer or a box's admin: layer 2's
  Dockerfile rendered from the plugins and the matrix (``render``, ``selection``, the hash-locked
  set ``hashlock``), the build through the docker SDK (``build``, its ``plan``, ``build_context``,
  ``build_args``, ``base_image``, ``file_server``, ``sources``, ``inputs``), the image's ``lock``
  and layer 3's ``verify``;
- :mod:`~puffer_core.tank.registry`: images to and from a registry by digest (``refs``: names,
  tags and digests; ``transfer``, ``push``, ``pull``, ``pins``);
- :mod:`~puffer_core.tank.box`: a shared box, on the box itself: ``protocol`` (its paths, group,
  labels and name patterns), ``login`` (run as the user on every ssh command), ``broker`` (run
  as root by sudo), root's ``ownership`` record and each tank's ``limits``. It imports the
  standard library, itself and the contract's stdlib-only modules (``errors``, ``atomic``,
  ``specs.images``), nothing else: code that runs as root, or at every login, loads nothing more;
- beside them: ``container`` (``puffer tank shell`` / ``run``: one's own container), ``engine``
  (connecting the docker SDK) and ``errors``.

The ``puffer tank`` commands are :mod:`puffer_core.cli.tank` and :mod:`puffer_core.cli.tank_registry`.
This package imports nothing at import time: ``import puffer_core.tank.box.broker`` loads no renderer.
"""
