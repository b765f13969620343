"""The plugins puffer-core ships: ``classic`` (gymnasium's classic control and the RL
debugging probes of ``probes``) here, and the gym and old-PettingZoo adapters, whose hook
classes live beside the conversions in ``puffer_core.adapters``. ``BUILTIN_PLUGINS`` in
the manager names them all."""
