"""One project's files on a package index, through the simple repository API.

Asks for PEP 691's JSON (``application/vnd.pypi.simple.v1+json``) and reads PEP 503's HTML
when that is what comes back (anchors with ``data-requires-python`` and ``data-yanked``).
``http(s)://`` indexes are read with urllib; a ``file://`` index is a folder in PEP 503's
layout (``<root>/<project>/index.html``). A project the index does not hold has no files; an
index that cannot be read raises :class:`IndexUnreachable`, one line that names the index
without its credentials.

The index is another party's server, so what it sends is bounded and checked:

- One request has one deadline, ``timeout`` seconds (``--timeout``) for the connection, every
  redirect and the whole page: a watchdog shuts the request's sockets when it passes, so a
  server that trickles its answer a byte at a time is cut there. A page is at most 64 MiB.
  (Resolving a host name is the system resolver's, bounded by its own timeouts.)
- At most :data:`MAX_REDIRECTS` redirects, each to an ``http(s)://`` URL; a redirect from
  ``https`` to ``http`` is refused. The index's credentials (``user:password@`` in its URL,
  sent as basic auth) go only to the scheme, host and port they were given with: a redirect
  anywhere else drops them, and a ``user:password@`` in a redirect's own URL is never used. A
  proxy's credentials (``Proxy-Authorization``) are dropped on every redirect: urllib adds them
  again only to a request that goes through the proxy.
- A page that does not parse (bad UTF-8, malformed or too deeply nested JSON, broken HTML)
  is an :class:`IndexUnreachable` like any unreadable index.
- A file's ``Requires-Python`` is kept only if it is at most :data:`MAX_REQUIRES_PYTHON`
  characters and each comma-separated clause is a comparison operator and a version made of
  PEP 440's version characters (:func:`requires_python_problem`). A file with any other
  value is left out, with ``IndexFile.refused`` saying why: no real index says such a thing,
  installers would match it against no Python or ignore it, and the matrix records what is
  kept in discovered.json and shows it in its tables. A release whose every file is left out
  is not discovered; ``puffer matrix discover`` says how many files of each package it left out.
"""

from __future__ import annotations

import base64
import http.client
import json
import pathlib
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from packaging.utils import canonicalize_name

from puffer_core.matrix.index_config import shown_url
from puffer_core.matrix.store import MatrixError

__all__ = [
    "DEFAULT_TIMEOUT",
    "JSON_TYPE",
    "MAX_REDIRECTS",
    "MAX_REQUIRES_PYTHON",
    "IndexFile",
    "IndexUnreachable",
    "keeps_credentials",
    "parse_html",
    "parse_json",
    "project_files",
    "redirect_problem",
    "requires_python_problem",
]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
#: Seconds one request to the index may take in all: connecting, every redirect, the whole page.
DEFAULT_TIMEOUT = 30.0
MAX_PAGE_BYTES = 64 * 1024 * 1024  # numpy's JSON page is a few MB
#: Redirects one request follows; the next one is refused.
MAX_REDIRECTS = 5
#: The longest ``Requires-Python`` kept (real ones are a few dozen characters).
MAX_REQUIRES_PYTHON = 200
#: The longest piece of a server's own text (an error's reason) an error message quotes.
MAX_QUOTED = 200


#: The fix every IndexUnreachable message ends with.
FIX = "check the network and the URL, or name a reachable index with --index URL"


class IndexUnreachable(MatrixError):
    """The package index could not be read (connection, HTTP error, redirect refused, unreadable page)."""

    def __init__(self, message: str):
        super().__init__(f"{message}; {FIX}")


@dataclass(frozen=True)
class IndexFile:
    """One file of a project as the index lists it; ``refused`` says why it is left out (None: kept)."""

    filename: str
    requires_python: str | None = None
    yanked: bool = False
    refused: str | None = None


# -- what a page may say ------------------------------------------------------------------

#: One clause of a Requires-Python: empty (a trailing comma), or an optional operator and a version.
_CLAUSE = re.compile(r"\s*|\s*(?:~=|===|==|!=|<=|>=|<|>)?\s*v?[0-9][A-Za-z0-9.*+!_-]*\s*")


def requires_python_problem(text: str) -> str | None:
    """Why a ``Requires-Python`` value is not kept, or None when it is a specifier of PEP 440's characters."""
    if len(text) > MAX_REQUIRES_PYTHON:
        return f"its Requires-Python is over {MAX_REQUIRES_PYTHON} characters"
    if not all(_CLAUSE.fullmatch(clause) for clause in text.split(",")):
        return "its Requires-Python is not a PEP 440 version specifier"
    return None


def _index_file(filename: str, requires: Any, yanked: bool) -> IndexFile:
    """The file as kept: a blank Requires-Python is none, a bad one leaves the file out (never stored)."""
    if not isinstance(requires, str) or not requires.strip():
        return IndexFile(filename, None, yanked)
    problem = requires_python_problem(requires)
    return IndexFile(filename, None if problem else requires, yanked, refused=problem)


def parse_json(payload: bytes) -> list[IndexFile]:
    """The files of a PEP 691 JSON project page."""
    data = json.loads(payload.decode("utf-8"))
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise ValueError("the JSON page has no 'files' list")
    return [
        _index_file(item["filename"], item.get("requires-python"), bool(item.get("yanked")))  # a reason is True
        for item in files
        if isinstance(item, dict) and isinstance(item.get("filename"), str)
    ]


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.files: list[IndexFile] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        values = dict(attrs)
        href = values.get("href")
        if not href:
            return
        path = urllib.parse.urlsplit(href).path
        filename = urllib.parse.unquote(path.rsplit("/", 1)[-1])
        if filename:
            self.files.append(_index_file(filename, values.get("data-requires-python"), "data-yanked" in values))


def parse_html(text: str) -> list[IndexFile]:
    """The files of a PEP 503 HTML project page (attribute values are unescaped: ``&gt;=3.10``)."""
    parser = _Anchors()
    parser.feed(text)
    parser.close()
    return parser.files


def _quoted(reason: object) -> str:
    """An error's text as one short printable line (a server may put anything in it)."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(reason) or type(reason).__name__)
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 1] + "…"


def _parse_page(payload: bytes, content_type: str, where: str, project: str) -> list[IndexFile]:
    """The page's files; any page that does not parse is a one-line IndexUnreachable."""
    try:
        if content_type.split(";")[0].strip() == JSON_TYPE:
            return parse_json(payload)
        return parse_html(payload.decode("utf-8"))
    except RecursionError:
        reason = "its JSON is nested too deeply"
    except (ValueError, AssertionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        reason = _quoted(exc)
    raise IndexUnreachable(f"the package index {where} sent an unreadable page for {project}: {reason}")


# -- file:// ------------------------------------------------------------------------------


def _read_file_index(index_url: str, project: str) -> tuple[bytes, str] | None:
    root = pathlib.Path(urllib.request.url2pathname(urllib.parse.urlsplit(index_url).path))
    if not root.is_dir():
        raise IndexUnreachable(f"cannot read the package index {shown_url(index_url)}: {root} is not a folder")
    page = root / project / "index.html"
    if not page.is_file():
        return None
    try:
        return page.read_bytes(), "text/html"
    except OSError as exc:
        raise IndexUnreachable(f"cannot read the package index {shown_url(index_url)}: {exc}") from exc


# -- http(s)://: one deadline per request ----------------------------------------------------


class _Deadline:
    """One request's deadline: when it passes, a watchdog shuts every socket of the request.

    A socket timeout bounds each wait, not their sum: a server sending a byte every second
    keeps each read alive. Shutting the socket wakes whatever read waits on it, in any phase.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self._expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._timer.cancel()

    @property
    def passed(self) -> bool:
        """Whether the deadline has passed (the watchdog fired, or a timeout just before it did)."""
        return self._expired or time.monotonic() >= self.end

    def remaining(self) -> float:
        """Seconds left; past the deadline, a TimeoutError."""
        left = self.end - time.monotonic()
        if left <= 0:
            self._expire()
            raise TimeoutError("the request's deadline passed")
        return left

    def socket_timeout(self) -> float:
        """A socket's own timeout: a little after the deadline, so that the watchdog ends a late request."""
        return self.remaining() + 1.0

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` when the deadline passes (at once if it has)."""
        with self._lock:
            self._sockets.append(sock)
            passed = self._expired
        if passed:
            _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Wake any read on ``sock``; its owner still closes it."""
    try:
        # the plain socket's shutdown, also for a TLS socket: SSLSocket.shutdown would unwrap it
        # under a thread that may be reading it
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # closed already, or moved to its TLS socket (which is watched too)


class _WatchedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection whose socket the request's deadline watches from its creation."""

    def __init__(self, host: str, *, deadline: _Deadline, timeout: object = None, **kwargs: Any):
        super().__init__(host, timeout=deadline.socket_timeout(), **kwargs)
        self.deadline = deadline
        self._create_connection = self._watched_socket  # before any proxy tunnel or TLS handshake

    def _watched_socket(self, address: tuple[str, int], timeout: object, source_address: Any = None) -> socket.socket:
        sock = socket.create_connection(address, self.deadline.remaining(), source_address)  # connect: the deadline
        sock.settimeout(self.deadline.socket_timeout())  # reads: the watchdog's
        self.deadline.watch(sock)
        return sock


class _WatchedHTTPSConnection(_WatchedHTTPConnection, http.client.HTTPSConnection):
    """:class:`_WatchedHTTPConnection` over TLS: the TLS socket is watched before its handshake."""

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # TCP (and a proxy's tunnel) on a watched socket
        server_hostname = self._tunnel_host or self.host
        # wrap_socket moves the file to a new socket object: watch that one before the handshake reads
        self.sock = self._context.wrap_socket(self.sock, server_hostname=server_hostname, do_handshake_on_connect=False)
        self.deadline.watch(self.sock)
        self.sock.do_handshake()


class _WatchedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTPConnection, req, deadline=self.deadline)


class _WatchedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline):
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_WatchedHTTPSConnection, req, deadline=self.deadline)


# -- http(s)://: redirects ------------------------------------------------------------------


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def keeps_credentials(source: str, target: str) -> bool:
    """Whether a redirect from ``source`` to ``target`` may carry the index's credentials: same scheme, host, port."""
    return _origin(source) == _origin(target)


def redirect_problem(source: str, target: str, hops: int) -> str | None:
    """Why the ``hops``-th redirect, from ``source`` to ``target``, is refused (None: it is followed)."""
    shown = f"{shown_url(source)} redirected to {shown_url(target)}"
    scheme = urllib.parse.urlsplit(target).scheme
    if hops > MAX_REDIRECTS:
        return f"the package index sent more than {MAX_REDIRECTS} redirects: {shown}"
    if scheme not in ("http", "https"):
        return f"the package index {shown}, which is not an http(s):// URL"
    if urllib.parse.urlsplit(source).scheme == "https" and scheme == "http":
        return f"the package index {shown}: a redirect from https to http is refused (it would drop encryption)"
    return None


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows :func:`redirect_problem`'s redirects; credentials only to their own origin."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request:
        hops = getattr(req, "puffer_redirects", 0) + 1
        problem = redirect_problem(req.full_url, newurl, hops)
        if problem:
            fp.close()
            raise IndexUnreachable(problem)
        target = shown_url(newurl)  # a user:password@ the server put in its Location is never used
        # req.headers, not header_items(): the unredirected ones (Host) belong to the old request
        new = urllib.request.Request(target, headers=dict(req.headers))
        # The proxy's credentials belong to the proxy: urllib's ProxyHandler adds them again to a request that
        # goes through it, and one that bypasses it (no_proxy) must not carry them to the host.
        new.remove_header("Proxy-authorization")
        if not keeps_credentials(req.full_url, target):
            new.remove_header("Authorization")
        new.puffer_redirects = hops  # type: ignore[attr-defined]
        return new


# -- http(s)://: one page -------------------------------------------------------------------


def _request(url: str) -> urllib.request.Request:
    """The request for ``url``, credentials in it sent as basic auth (urllib does not read them)."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": ACCEPT, "User-Agent": "puffer-matrix-discover"}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        url = shown_url(url)
    return urllib.request.Request(url, headers=headers)


def _fetch(request: urllib.request.Request, deadline: _Deadline) -> tuple[bytes, str]:
    """The page's bytes and Content-Type, redirects followed, everything within ``deadline``."""
    opener = urllib.request.build_opener(_WatchedHTTPHandler(deadline), _WatchedHTTPSHandler(deadline), _Redirects())
    with opener.open(request, timeout=deadline.socket_timeout()) as response:
        chunks, size = [], 0
        while chunk := response.read(1 << 16):
            size += len(chunk)
            if size > MAX_PAGE_BYTES:
                raise ValueError(f"the page is over {MAX_PAGE_BYTES >> 20} MiB")
            chunks.append(chunk)
        return b"".join(chunks), response.headers.get("Content-Type", "")


def _read_http_index(index_url: str, project: str, timeout: float) -> tuple[bytes, str] | None:
    url = f"{index_url.rstrip('/')}/{project}/"
    where = shown_url(index_url)
    late = f"the package index {where} sent no complete page for {project} within {timeout:g} s (--timeout)"
    with _Deadline(timeout) as deadline:
        try:
            page = _fetch(_request(url), deadline)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code in (404, 410):
                return None  # the index does not hold this project
            refused = " (a redirect to a URL that is not http(s)://)" if 300 <= exc.code < 400 else ""
            raise IndexUnreachable(f"cannot read the package index {where}: HTTP {exc.code}{refused}") from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            if deadline.passed:
                raise IndexUnreachable(late) from None
            reason = getattr(exc, "reason", None) or exc
            raise IndexUnreachable(f"cannot reach the package index {where}: {_quoted(reason)}") from None
        if deadline.passed:  # a page cut by the watchdog can look complete
            raise IndexUnreachable(late)
        return page


def project_files(index_url: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> list[IndexFile]:
    """Every file of project ``name`` on the index (none when it does not hold the project).

    ``timeout`` bounds the whole request to an ``http(s)://`` index: connecting, redirects, the page.
    """
    project = canonicalize_name(name)
    scheme = urllib.parse.urlsplit(index_url).scheme
    if scheme == "file":
        page = _read_file_index(index_url, project)
    elif scheme in ("http", "https"):
        page = _read_http_index(index_url, project, timeout)
    else:
        raise IndexUnreachable(f"the package index {shown_url(index_url)} is not an http(s):// or file:// URL")
    if page is None:
        return []
    return _parse_page(*page, shown_url(index_url), project)
