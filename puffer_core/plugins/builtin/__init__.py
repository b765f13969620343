"""The plugins puffer-core ships: ``classic`` (gymnasium's classic control and the RL
debugging probes of ``probes``) and the gym and old-PettingZoo adapters (``adapters``: their
hook classes beside the conversions). ``BUILTIN_PLUGINS`` in the manager imports them all."""
