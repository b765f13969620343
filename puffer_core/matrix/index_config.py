"""Which package indexes ``puffer matrix discover`` asks: ``--index``, else the ones pip and uv would use.

Without ``--index`` the main index is the first set of UV_DEFAULT_INDEX, UV_INDEX_URL,
PIP_INDEX_URL and pip's configuration (``index-url`` of its ``[global]`` or ``[install]``
section), else pip's own default index (read from the pip installed beside this Python,
so the project names no index itself); the extra indexes (UV_INDEX, UV_EXTRA_INDEX_URL,
PIP_EXTRA_INDEX_URL, pip's ``extra-index-url``) are asked too, and their releases joined.
uv's own configuration files are not read. URLs are shown only through :func:`shown_url`,
which drops any ``user:password@``.
"""

from __future__ import annotations

import configparser
import os
import pathlib
import urllib.parse
from collections.abc import Mapping

from puffer_core.matrix.store import MatrixError

__all__ = ["default_index", "index_urls", "pip_config_files", "shown_url"]


def default_index() -> str:
    """The index pip (and uv) use when nothing is configured, as pip itself names it."""
    try:
        from pip._internal.models.index import PyPI  # pip's own constant; pip has no public API
    except ImportError:
        raise MatrixError(
            "no package index is configured and pip, which names the default one, is not installed here: "
            "pass --index URL, set UV_DEFAULT_INDEX or PIP_INDEX_URL, or pip install pip"
        ) from None
    return PyPI.simple_url


def shown_url(url: str) -> str:
    """``url`` without credentials: ``https://user:secret@host/simple`` → ``https://host/simple``."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal keeps its brackets
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def pip_config_files(environ: Mapping[str, str]) -> list[pathlib.Path]:
    """pip's configuration files in the order pip reads them (later ones win)."""
    if environ.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [pathlib.Path(d) / "pip" / "pip.conf" for d in reversed(dirs.split(os.pathsep)) if d]
    files.append(pathlib.Path("/etc/pip.conf"))
    home = pathlib.Path(environ.get("HOME") or pathlib.Path.home())
    files.append(home / ".pip" / "pip.conf")
    files.append(pathlib.Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf")
    if environ.get("PIP_CONFIG_FILE"):
        files.append(pathlib.Path(environ["PIP_CONFIG_FILE"]))
    return files


def _pip_config(environ: Mapping[str, str]) -> dict[str, str]:
    """``index-url`` and ``extra-index-url`` from pip's configuration files."""
    found: dict[str, str] = {}
    for path in pip_config_files(environ):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            continue  # pip would complain about it itself; discovery asks the indexes it can read
        for section in ("global", "install"):
            for key in ("index-url", "extra-index-url"):
                if parser.has_option(section, key):
                    found[key] = parser.get(section, key)
    return found


def _split(value: str | None) -> list[str]:
    return [part for part in (value or "").split() if part]


def index_urls(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The index URLs to ask, main one first, without duplicates."""
    if explicit:
        return [explicit.rstrip("/")]
    environ = os.environ if environ is None else environ
    config = _pip_config(environ)
    main = (
        next(
            (
                value
                for value in (
                    environ.get("UV_DEFAULT_INDEX"),
                    environ.get("UV_INDEX_URL"),
                    environ.get("PIP_INDEX_URL"),
                    config.get("index-url"),
                )
                if value and value.strip()
            ),
            None,
        )
        or default_index()
    )
    extras = [
        *_split(environ.get("UV_INDEX")),
        *_split(environ.get("UV_EXTRA_INDEX_URL")),
        *_split(environ.get("PIP_EXTRA_INDEX_URL")),
        *_split(config.get("extra-index-url")),
    ]
    urls: list[str] = []
    for url in [main.strip(), *extras]:
        url = url.split("=", 1)[1] if "=" in url.split("://", 1)[0] else url  # UV_INDEX's name=URL form
        url = url.rstrip("/")
        if url not in urls:
            urls.append(url)
    return urls
