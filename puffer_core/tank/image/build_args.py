"""Build arguments taken from this machine, never from committed text: pip's index settings and proxies.

- pip's index settings (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_TRUSTED_HOST``,
  ``PIP_DEFAULT_TIMEOUT``), read from the environment and ``pip config list``; ``file:``
  indexes (not reachable from a build) and URLs carrying credentials (they would be
  recorded in the image history) are left out, with a note.
- the proxy variables (``HTTP_PROXY`` …), Docker's predefined build arguments, which the
  engine keeps out of the image history.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["PIP_ARGS", "PROXY_ARGS", "machine_build_args"]

#: Docker's predefined build arguments: passed through, kept out of the image history.
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY")
#: Build argument → the ``pip config`` keys it is read from.
PIP_ARGS = {
    "PIP_INDEX_URL": ("index-url",),
    "PIP_EXTRA_INDEX_URL": ("extra-index-url",),
    "PIP_TRUSTED_HOST": ("trusted-host",),
    "PIP_DEFAULT_TIMEOUT": ("timeout", "default-timeout"),
}


def _pip_config(python: str = sys.executable) -> dict[str, str]:
    """``pip config list`` as {key: value} (``global.index-url``, ``:env:.timeout``, …)."""
    try:
        out = subprocess.run(
            [python, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key.strip()] = value.strip().strip("'\"")
    return found


def _usable_urls(value: str, notes: list[str], what: str) -> str:
    kept = []
    for url in value.split():
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            notes.append(f"{what} {url} is not passed to the build: a build cannot reach {parts.scheme} URLs")
        elif parts.username or parts.password:
            notes.append(f"{what} for {parts.hostname} is not passed: the image history would keep its credentials")
        else:
            kept.append(url)
    return " ".join(kept)


def machine_build_args(
    environ: Mapping[str, str] | None = None, pip_config: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Build arguments taken from this machine (pip's index settings, proxies), and notes."""
    environ = os.environ if environ is None else environ
    config = _pip_config() if pip_config is None else pip_config
    args: dict[str, str] = {}
    notes: list[str] = []
    for arg, keys in PIP_ARGS.items():
        value = environ.get(arg)
        if value is None:
            for scope in (":env:", "global", "install"):
                for key in keys:
                    if f"{scope}.{key}" in config:
                        value = config[f"{scope}.{key}"]
                        break
                if value is not None:
                    break
        if not value:
            continue
        if arg.endswith("_URL"):
            value = _usable_urls(value, notes, arg)
        if value:
            args[arg] = value
    for name in PROXY_ARGS:
        for variant in (name, name.lower()):
            if environ.get(variant):
                args[variant] = environ[variant]
    return args, notes
