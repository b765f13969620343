"""The environment of a matrix cell's commands: an allowlist, never the caller's whole environment.

A cell runs code the core does not control: plugin code, environment packages and the
build backends of any sdist it installs. None of them gets the caller's tokens, keys or
passwords, nor the caller's home. Every command the matrix starts runs in an empty
temporary working directory with a temporary ``HOME`` of its own (:mod:`.processes`;
removed after it), and gets only these variables (when set):

- everywhere: PATH, TMPDIR, LD_LIBRARY_PATH; locale (LANG, LANGUAGE, LC_*, TZ); proxies
  (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY and their lower-case forms); CA bundles
  (SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE); PYENV_ROOT and
  PYENV_VERSION (interpreters are found through pyenv's shims); and what the matrix sets
  itself: UV_PYTHON_DOWNLOADS=never (unless set), UV_NO_PROGRESS=1, PYTHONFAULTHANDLER=1;
- for the installer only (``uv venv``, ``uv build``, ``uv pip``, ``uv python find``, not
  the smoke run): the XDG base directories, where uv's configuration, cache and Pythons live
  (each unset one set to its default under the caller's real home, so the temporary HOME
  does not hide them: uv keeps one shared cache); uv's settings that carry no credentials
  (``INSTALLER_VARIABLES``: index strategy, offline, TLS, cache, interpreter) and the
  compiler variables an sdist build reads (CC, CXX, CFLAGS, CXXFLAGS, CPPFLAGS, LDFLAGS,
  PKG_CONFIG_PATH);
- whatever ``--pass-env NAME`` names, everywhere (repeatable; ``*`` and ``?`` match as in
  tox's pass_env). The index settings (``INDEX_VARIABLES``: PIP_*, UV_INDEX, UV_INDEX_URL,
  the index credentials, UV_DEFAULT_INDEX, UV_EXTRA_INDEX_URL, UV_FIND_LINKS,
  SSL_CLIENT_CERT) pass only this way: their URLs often hold credentials, and an sdist's
  build would see them (``--pass-env 'UV_INDEX*'`` for a private index). uv still reads its
  configuration files (uv.toml), whose settings never reach a cell's environment.

- for the Docker client of a tank-only cell (``docker image inspect``, ``docker run``; the
  container itself gets no variable of the caller's): ``DOCKER_CLIENT_VARIABLES`` (DOCKER_HOST,
  DOCKER_CONTEXT, DOCKER_CONFIG, TLS), DOCKER_CONFIG defaulting to the caller's ``~/.docker``;

Never passed, even when named: ``NEVER_PASSED`` (PYTHONPATH, VIRTUAL_ENV, HOME,
PUFFER_LOAD_PLUGINS, …): they would make a cell import from outside its venv (HOME holds the
user site-packages) or load other plugins than its own.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
from collections.abc import Iterable, Mapping

from puffer_core.matrix.store import MatrixError

__all__ = [
    "DOCKER_CLIENT_VARIABLES",
    "EVERYWHERE_VARIABLES",
    "INDEX_VARIABLES",
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
    "PYENV_ROOT",
    "PYENV_VERSION",
)

#: Passed to the installer's commands only: how packages are fetched and built (no credentials).
INSTALLER_VARIABLES = (
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "UV_NO_INDEX",
    "UV_INDEX_STRATEGY",
    "UV_KEYRING_PROVIDER",
    "UV_INSECURE_HOST",
    "UV_NATIVE_TLS",
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

#: Passed to the Docker client of a tank-only cell (``docker run`` of the image, not the code in
#: it: the container gets none of them): which engine, and the client's own configuration.
DOCKER_CLIENT_VARIABLES = (
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
    "DOCKER_API_VERSION",
)

#: Where packages come from: passed only when ``--pass-env`` names them (their URLs often hold
#: credentials, and an sdist's build sees what uv sees). The help lists them.
INDEX_VARIABLES = (
    "PIP_*",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_INDEX_*_USERNAME",
    "UV_INDEX_*_PASSWORD",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "SSL_CLIENT_CERT",
)

#: Never in a cell, even when ``--pass-env`` names them (a cell's venv, plugin and HOME are its own).
NEVER_PASSED = frozenset(
    {
        "HOME",
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

#: The XDG base directories uv's commands keep (its configuration, cache and Pythons live there),
#: each at its default under the caller's home when unset: the temporary HOME must not hide them.
_XDG_DEFAULTS = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache", "XDG_DATA_HOME": ".local/share"}

#: ``install``: the uv commands (venv, build, pip, python find); ``smoke``: the run inside the venv;
#: ``docker``: the Docker client a tank-only cell runs its image with.
STAGES = ("install", "smoke", "docker")

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
    own = {"install": INSTALLER_VARIABLES, "docker": DOCKER_CLIENT_VARIABLES}.get(stage, ())
    patterns = [*EVERYWHERE_VARIABLES, *own, *pass_env]
    env = {name: value for name, value in environ.items() if name not in NEVER_PASSED and _matches(name, patterns)}
    for name, value in _MATRIX_DEFAULTS.items():
        env.setdefault(name, value)
    env.update(_MATRIX_FORCED)
    home = _caller_home(environ)
    if stage == "install" and home:
        for name, below in _XDG_DEFAULTS.items():
            env.setdefault(name, os.path.join(home, below))
    if stage == "docker" and home:  # the client's contexts and credentials, which the temporary HOME hides
        env.setdefault("DOCKER_CONFIG", os.path.join(home, ".docker"))
    return env


def _caller_home(environ: Mapping[str, str]) -> str | None:
    """The caller's real home: ``HOME``, else the account's (as Python's ``expanduser`` finds it)."""
    home = environ.get("HOME")
    if home:
        return home
    with contextlib.suppress(KeyError, ImportError, OSError):
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    return None


def unmatched_pass_env(pass_env: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``--pass-env`` values that match no variable here (most likely a typo)."""
    environ = os.environ if environ is None else environ
    return [pattern for pattern in pass_env if not any(fnmatch.fnmatchcase(name, pattern) for name in environ)]


def allowlist_help() -> str:
    """The allowlist as the ``matrix run`` help shows it (one ``\\b`` block, click keeps its lines)."""
    return "\n".join(
        [
            "\b",
            "Each cell command runs in an empty temporary directory with a temporary HOME,",
            "and sees only these variables of the caller's environment:",
            *_wrapped("  every command:", EVERYWHERE_VARIABLES),
            "  (and UV_PYTHON_DOWNLOADS=never, UV_NO_PROGRESS=1, PYTHONFAULTHANDLER=1)",
            *_wrapped("  uv's commands only (not the smoke run):", INSTALLER_VARIABLES),
            "  (each XDG_* unset is set there to its default under your home: uv's cache)",
            *_wrapped("  the Docker client of a tank-only cell (not the container):", DOCKER_CLIENT_VARIABLES),
            "  plus each --pass-env NAME (a glob too: 'UV_INDEX*'), everywhere.",
            *_wrapped("  index settings (may hold credentials), only with --pass-env:", INDEX_VARIABLES),
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
