"""PufferTank's images to and from a registry, by digest (see ``puffer_core.tank``)."""
