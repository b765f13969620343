"""``puffer tank login``: a box's login shell that lands each user in their own long-lived PufferTank."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Placeholder entry (filled in by the login work of issue #35)."""
    print("puffertank-login: not built yet", file=sys.stderr)
    return 2
