"""Exceptions raised by Puffer Core; every message names the culprit and the fix."""

from __future__ import annotations

import re

__all__ = [
    "DEBUG_ENV",
    "APIUsageError",
    "EnvCallError",
    "MissingDependencyError",
    "PluginError",
    "PufferError",
    "RayConnectionError",
    "SpaceError",
    "UnknownEnvError",
    "WorkerError",
    "one_line",
]

#: Set PUFFER_DEBUG=1 to see the traceback of an error.
DEBUG_ENV = "PUFFER_DEBUG"


class PufferError(Exception):
    """Base class of every error Puffer Core raises on purpose."""


class PluginError(PufferError):
    """A plugin failed to import, returned a bad hook value, or clashes with another.

    Args:
        message: One line naming the plugin, what is wrong and the fix.
        plugin: The plugin at fault.
        field: The spec field or hook at fault (``"id"``, ``"api"``, …).
    """

    def __init__(self, message: str, plugin: str | None = None, field: str | None = None):
        super().__init__(message)
        self.plugin = plugin
        self.field = field


class WorkerError(PufferError):
    """A vector worker raised, died or went silent; names the worker, env and cause.

    Args:
        message: One line naming the worker, the env and the cause, with the env's traceback.
        worker: The worker's index.
        env_index: The env's index in the vector env.
        cause: What happened (the env's exception, the signal, the timeout).
    """

    def __init__(
        self,
        message: str,
        worker: int | None = None,
        env_index: int | None = None,
        cause: str | None = None,
    ):
        super().__init__(message)
        self.worker = worker
        self.env_index = env_index
        self.cause = cause


class EnvCallError(PufferError):
    """A method called on the envs of a vector env (``call``, ``env_method``) raised there.

    The envs stay usable; the message names the env and carries the traceback.

    Args:
        message: The env and its exception, with the traceback.
        env_index: The env whose call raised.
    """

    def __init__(self, message: str, env_index: int | None = None):
        super().__init__(message)
        self.env_index = env_index


class APIUsageError(PufferError):
    """The caller used an API out of order or with arguments that cannot work."""


class RayConnectionError(APIUsageError):
    """The Ray cluster an ``address`` (or ``RAY_ADDRESS``) names cannot be found, reached or joined."""


class SpaceError(PufferError):
    """A space cannot be flattened, or a value does not fit its space."""


class UnknownEnvError(PufferError, KeyError):
    """No loaded plugin provides the requested environment id."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class MissingDependencyError(PufferError, ImportError):
    """An environment's own package (nle, ale-py, …) is not installed."""


_TRACEBACK_HEAD = "Traceback (most recent call last):"
_TRACEBACK_INTRO = re.compile(r"[;:,]?\s*(its|the) traceback:?\s*$")


def one_line(message: str) -> str:
    """``message`` as one line: a traceback it quotes (a WorkerError's) is cut to its last
    line, the exception itself, with a pointer to PUFFER_DEBUG; other lines are joined."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else message.strip()
    if _TRACEBACK_HEAD in lines:
        head = " ".join(lines[: lines.index(_TRACEBACK_HEAD)])
        head = _TRACEBACK_INTRO.sub("", head)
        return f"{head}: {lines[-1]} (set {DEBUG_ENV}=1 for the traceback)"
    return " ".join(lines)
