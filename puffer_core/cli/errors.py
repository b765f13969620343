"""How every `puffer` command group reports errors: one line on stderr, a non-zero exit,
never a traceback (unless PUFFER_DEBUG=1).

Click's own usage errors (a missing argument, an unknown option, a value out of range)
are one line too, ``error: <click's message> (see `puffer run --help`)``, with click's exit
code 2; bare ``puffer`` or ``puffer tank`` still print their help.

Lives apart from ``puffer_core.cli.main`` because the groups in modules of their own
(``puffer_core.cli.matrix``, ``puffer_core.cli.tank``) use it and ``puffer_core.cli.main`` imports them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from rich.markup import escape

from puffer_core.cli.tables import output_console
from puffer_core.errors import DEBUG_ENV, PufferError, one_line

__all__ = ["MessageGroup", "err_console", "fail"]

err_console = output_console(stderr=True)


def fail(message: str, code: int = 1) -> None:
    """Print ``error: message`` to stderr (as one line) and exit with ``code``."""
    # escape: messages quote things like pip extras ("puffer-core[train]") that rich would
    # otherwise take for markup and drop.
    err_console.print(f"[bold red]error:[/] {escape(one_line(message))}", highlight=False, soft_wrap=True)
    sys.exit(code)


def _usage_message(exc: click.ClickException) -> str:
    """Click's message for a usage error, pointing at the help of the command it concerns."""
    message = exc.format_message().rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        message += f" (see `{ctx.command_path} --help`)"
    return message


class MessageGroup(click.Group):
    """A click group that turns exceptions into one-line messages and exit codes.

    PufferError: its message, exit code ``exc.exit_code`` (default 1); OSError: the path and
    the system's reason; anything else: the message with a hint to set PUFFER_DEBUG=1;
    click usage errors: click's message on one line, exit 2; Ctrl-C: ``interrupted_message``,
    exit 130.
    """

    interrupted_message = "interrupted"

    def report(self, exc: PufferError) -> None:
        """Print the message for ``exc``; subclasses add details (e.g. a build log's tail)."""
        err_console.print(f"[bold red]error:[/] {escape(one_line(str(exc)))}", highlight=False, soft_wrap=True)

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            # Not standalone: click would print a usage error as four lines; we print one.
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `puffer tank`: the help, as click prints it
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            fail(_usage_message(exc), exc.exit_code)
        except click.exceptions.Abort:
            fail("aborted", 1)
        # Not standalone, click returns the code of an explicit exit (--help, --version: 0);
        # commands themselves return None.
        sys.exit(result if isinstance(result, int) else 0)

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
        except OSError as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            fail(_os_message(exc))
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            fail(f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 to see the traceback)")


def _os_message(exc: OSError) -> str:
    """``cannot use PATH: Permission denied``: the file and the system's reason, no errno."""
    if exc.filename is None:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return f"cannot use {exc.filename}: {exc.strerror or exc}"
