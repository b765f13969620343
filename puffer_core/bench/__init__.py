"""`puffer bench` and ``nox -s bench``: ``vectorization`` (backends and peers side by side,
the standard set and its report), ``emulation`` (one env's emulation overhead),
``ceiling`` (what the cores allow), ``uneven`` (fast and slow cores), ``faults`` (restart
latency), ``training`` (`puffer train` against SB3) and ``tank_start`` (PufferTank's
start-to-prompt time). ``puffer_core.vector.autotuner`` measures with the same tools."""
