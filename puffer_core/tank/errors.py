"""PufferTank's errors; each carries the exit code the ``puffer tank`` command ends with."""

from __future__ import annotations

from puffer_core.errors import PufferError

__all__ = ["BrokerError", "BuildError", "ConstraintsError", "NoEngineError", "TankError"]


class TankError(PufferError):
    """A PufferTank render or build cannot go on; the message says why and what to do."""

    exit_code = 1


class BrokerError(TankError):
    """The broker refused or failed: one line for the caller, naming what to do."""


class ConstraintsError(TankError):
    """The common constraint set is missing or holds a line that is not a constraint."""


class NoEngineError(TankError):
    """No Docker engine answered (or the docker SDK is missing): exit code 2."""

    exit_code = 2


class BuildError(TankError):
    """The engine reported an error while building a layer."""

    def __init__(self, message: str, stage: str | None = None, log_tail: tuple[str, ...] = ()):
        super().__init__(message)
        self.stage = stage
        self.log_tail = log_tail
