"""The ``puffer`` command: ``main`` (the group and its commands; the console script's
entry point), ``errors`` (one-line messages), ``options`` (shared option types),
``tables`` (terminal and plain output), ``rollout`` (`puffer run`'s job) and ``scaffold``
(`puffer new-plugin`). The matrix, tank and train packages add their own subcommands."""
