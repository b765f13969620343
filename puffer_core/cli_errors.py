"""How every `puffer` command group reports errors: one-line messages, never tracebacks.

Lives apart from ``puffer_core.cli`` because the `matrix` and `tank` groups also run on
their own (``python -m puffer_core.matrix``) and ``puffer_core.cli`` imports them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from puffer_core.errors import PufferError

__all__ = ["DEBUG_ENV", "MessageGroup", "err_console", "fail"]

#: Set PUFFER_DEBUG=1 to see the traceback of an error.
DEBUG_ENV = "PUFFER_DEBUG"

err_console = Console(stderr=True)


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` to stderr and exit with ``code``."""
    # escape: messages quote things like pip extras ("puffer-core[train]") that rich would
    # otherwise take for markup and drop.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


class MessageGroup(click.Group):
    """A click group that turns exceptions into messages and exit codes.

    PufferError: its message, exit code ``exc.exit_code`` (default 1); anything else: the
    message with a hint to set PUFFER_DEBUG=1; Ctrl-C: ``interrupted_message``, exit 130.
    """

    interrupted_message = "interrupted"

    def report(self, exc: PufferError) -> None:
        """Print the message for ``exc``; subclasses add details (e.g. a build log's tail)."""
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except PufferError as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            self.report(exc)
            sys.exit(getattr(exc, "exit_code", 1))
        except KeyboardInterrupt:
            err_console.print(self.interrupted_message)
            sys.exit(130)
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            fail(f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 to see the traceback)")
