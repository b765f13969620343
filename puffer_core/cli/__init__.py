"""The ``puffer`` command: ``main`` (the group and its commands; the console script's
entry point), ``errors`` (one-line messages), ``options`` (shared option types),
``tables`` (terminal and plain output), ``rollout`` (`puffer run`'s job) and ``scaffold``
(`puffer new-plugin`), ``matrix`` and ``tank`` (the `puffer matrix` and `puffer tank` groups
over :mod:`puffer_core.matrix` and :mod:`puffer_core.tank`). The train package adds its own subcommands."""
