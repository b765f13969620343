"""The environment of a matrix cell's commands: an allowlist, never the caller's whole environment.

A cell runs code the core does not control: plugin code, environment packages and the
build backends of any sdist it installs. None of them gets the caller's tokens, keys or
passwords. Every command the matrix starts gets only these variables (when set):

- everywhere: PATH, HOME, TMPDIR, LD_LIBRARY_PATH; locale (LANG, LANGUAGE, LC_*, TZ);
  proxies (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY and their lower-case forms); CA
  bundles (SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE); the XDG base
  directories (where pip's and uv's configuration, uv's cache and uv's Pythons live);
  PYENV_ROOT and PYENV_VERSION (interpreters are found through pyenv's shims); and what the
  matrix sets itself: UV_PYTHON_DOWNLOADS=never (unless set), UV_NO_PROGRESS=1,
  PYTHONFAULTHANDLER=1;
- for the installer only (``uv venv``, ``uv build``, ``uv pip``, ``uv python find``, not
  the smoke run): pip's configuration (PIP_*: index, find-links, trusted hosts, certificate,
  config file), uv's index, TLS, cache and interpreter settings (``INSTALLER_VARIABLES``)
  and the compiler variables an sdist build reads (CC, CXX, CFLAGS, CXXFLAGS, CPPFLAGS,
  LDFLAGS, PKG_CONFIG_PATH);
- whatever ``--pass-env NAME`` names, everywhere (repeatable; ``*`` and ``?`` match as in
  tox's pass_env: ``--pass-env 'UV_INDEX_*'`` passes a private index's credentials).

Never passed, even when named: ``NEVER_PASSED`` (PYTHONPATH, VIRTUAL_ENV, PUFFER_LOAD_PLUGINS,
…): they would make a cell import from outside its venv or load other plugins than its own.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping

from puffer_core.matrix.store import MatrixError

__all__ = [
    "EVERYWHERE_VARIABLES",
    "INSTALLER_VARIABLES",
    "NEVER_PASSED",
    "STAGES",
    "allowlist_help",
    "cell_environment",
    "check_pass_env",
    "unmatched_pass_env",
]

#: Passed to every command of a cell (names, or globs with ``*``).
EVERYWHERE_VARIABLES = (
    "PATH",
    "HOME",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "PYENV_ROOT",
    "PYENV_VERSION",
)

#: Passed to the installer's commands only: where packages come from and how they build.
INSTALLER_VARIABLES = (
    "PIP_*",
    "UV_INDEX",
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_NO_INDEX",
    "UV_INDEX_STRATEGY",
    "UV_KEYRING_PROVIDER",
    "UV_INSECURE_HOST",
    "UV_NATIVE_TLS",
    "SSL_CLIENT_CERT",
    "UV_HTTP_TIMEOUT",
    "UV_HTTP_RETRIES",
    "UV_OFFLINE",
    "UV_CACHE_DIR",
    "UV_NO_CACHE",
    "UV_LINK_MODE",
    "UV_CONCURRENT_DOWNLOADS",
    "UV_CONCURRENT_BUILDS",
    "UV_CONCURRENT_INSTALLS",
    "UV_CONFIG_FILE",
    "UV_NO_CONFIG",
    "UV_PYTHON_INSTALL_DIR",
    "UV_PYTHON_PREFERENCE",
    "UV_PYTHON_DOWNLOADS",
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
)

#: Never in a cell, even when ``--pass-env`` names them (a cell's venv and plugin are its own).
NEVER_PASSED = frozenset(
    {
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "UV_PROJECT_ENVIRONMENT",
        "PUFFER_LOAD_PLUGINS",
        "PUFFER_DISABLE_PLUGINS",
    }
)

#: What the matrix sets unless the caller did (an interpreter uv does not find is a result,
#: ``interpreter-missing``, not a download), and what it always sets.
_MATRIX_DEFAULTS = {"UV_PYTHON_DOWNLOADS": "never", "PYTHONFAULTHANDLER": "1"}
_MATRIX_FORCED = {"UV_NO_PROGRESS": "1"}

#: ``install``: the uv commands (venv, build, pip, python find); ``smoke``: the run inside the venv.
STAGES = ("install", "smoke")

_PATTERN_RE = re.compile(r"^[A-Za-z0-9_*?]+\Z")


def check_pass_env(patterns: Iterable[str]) -> list[str]:
    """The ``--pass-env`` values, checked: names or ``*``/``?`` globs, none of ``NEVER_PASSED``."""
    checked = []
    for pattern in patterns:
        if not _PATTERN_RE.match(pattern):
            raise MatrixError(
                f"--pass-env {pattern!r} is not a variable name: use letters, digits and '_' ('*' and '?' as globs)"
            )
        if pattern in NEVER_PASSED:
            raise MatrixError(
                f"--pass-env {pattern}: the matrix never passes it to a cell (it would make the cell use "
                "packages or plugins from outside its own venv)"
            )
        checked.append(pattern)
    return checked


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def cell_environment(
    stage: str, pass_env: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of one kind of cell command (see the module docstring), from ``environ``."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, not {stage!r}")
    environ = os.environ if environ is None else environ
    patterns = [*EVERYWHERE_VARIABLES, *(INSTALLER_VARIABLES if stage == "install" else ()), *pass_env]
    env = {name: value for name, value in environ.items() if name not in NEVER_PASSED and _matches(name, patterns)}
    for name, value in _MATRIX_DEFAULTS.items():
        env.setdefault(name, value)
    env.update(_MATRIX_FORCED)
    return env


def unmatched_pass_env(pass_env: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``--pass-env`` values that match no variable here (most likely a typo)."""
    environ = os.environ if environ is None else environ
    return [pattern for pattern in pass_env if not any(fnmatch.fnmatchcase(name, pattern) for name in environ)]


def allowlist_help() -> str:
    """The allowlist as the ``matrix run`` help shows it (one ``\\b`` block, click keeps its lines)."""
    return "\n".join(
        [
            "\b",
            "Cells see only these variables of the caller's environment:",
            *_wrapped("  every command:", EVERYWHERE_VARIABLES),
            "  (and UV_PYTHON_DOWNLOADS=never, UV_NO_PROGRESS=1, PYTHONFAULTHANDLER=1)",
            *_wrapped("  uv's commands only (not the smoke run):", INSTALLER_VARIABLES),
            "  plus each --pass-env NAME (a glob too: 'UV_INDEX_*'), everywhere.",
            *_wrapped("  never, even with --pass-env:", sorted(NEVER_PASSED)),
        ]
    )


def _wrapped(head: str, names: Iterable[str], width: int = 78) -> list[str]:
    lines, line = [], head
    for name in names:
        if len(line) + 1 + len(name) > width:
            lines.append(line)
            line = "    "
        line += ("" if line.endswith(" ") else " ") + name
    lines.append(line)
    return lines
