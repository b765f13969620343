"""One environment's path: the plugin's creator → compatibility (``puffer_adapt``) → the
plugin's wrappers → episode statistics (``postprocess``) → emulation (``flatten``,
``buffers``, ``emulation``), made by ``environments.make`` and rebuilt in worker processes by
``factory.EnvFactory``; ``recording`` records env 0 where it steps. Nothing is imported here:
``puffer_core.make`` and the faces ``puffer_core.emulation`` / ``.postprocess`` are the public
way in."""
