"""Ray: the vector env API over Ray actors, for users who outgrow one machine.

``puffer_core.vector.make(..., backend="ray")`` makes a :class:`Ray`. Ray itself is
imported only when one is made (it is an optional extra). The modules:

:mod:`.connect`
    Which Ray: the one initialised in this process, the cluster ``address`` (or
    ``RAY_ADDRESS``) names, checked to answer before ``ray.init``, or our own instance.
:mod:`.start`
    Our own instance: this machine only, services on loopback, token authentication on.
:mod:`.private`
    Our own instance's token and temporary directory, readable by this user only.
:mod:`.placement`
    Where the actors run: a placement group (``placement="spread" | "pack"``), and each
    worker's node as its actor reports it (``envs.placement``).
:mod:`.actor`
    One actor's body: an ``EnvGroup`` over its share of the envs.
:mod:`.traffic`
    The bytes each reset / step round trip carries (``envs.stats["traffic"]``).
:mod:`.backend`
    ``Ray`` itself: the vector env API, faults and restarts (a node lost included).
"""

from puffer_core.vector.ray.backend import Ray
from puffer_core.vector.ray.connect import import_ray

__all__ = ["Ray", "import_ray"]
