"""One project's files on a package index, through the simple repository API.

Asks for PEP 691's JSON (``application/vnd.pypi.simple.v1+json``) and reads PEP 503's HTML
when that is what comes back (anchors with ``data-requires-python`` and ``data-yanked``).
``http(s)://`` indexes are read with urllib, every wait bounded; a ``file://`` index is a
folder in PEP 503's layout (``<root>/<project>/index.html``). A project the index does not
hold has no files; an index that cannot be read raises :class:`IndexUnreachable`.
"""

from __future__ import annotations

import base64
import json
import pathlib
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.utils import canonicalize_name

from puffer_core.matrix.index_config import shown_url
from puffer_core.matrix.store import MatrixError

__all__ = ["DEFAULT_TIMEOUT", "JSON_TYPE", "IndexFile", "IndexUnreachable", "parse_html", "parse_json", "project_files"]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
#: Seconds one request may wait for the index (connect, each read); the whole page gets four times that.
DEFAULT_TIMEOUT = 30.0
MAX_PAGE_BYTES = 64 * 1024 * 1024  # numpy's JSON page is a few MB


#: The fix every IndexUnreachable message ends with.
FIX = "check the network and the URL, or name a reachable index with --index URL"


class IndexUnreachable(MatrixError):
    """The package index could not be read (connection, HTTP error, unreadable folder)."""

    def __init__(self, message: str):
        super().__init__(f"{message}; {FIX}")


@dataclass(frozen=True)
class IndexFile:
    """One file of a project as the index lists it."""

    filename: str
    requires_python: str | None = None
    yanked: bool = False


def parse_json(payload: bytes) -> list[IndexFile]:
    """The files of a PEP 691 JSON project page."""
    data = json.loads(payload.decode("utf-8"))
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise ValueError("the JSON page has no 'files' list")
    found = []
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            continue
        requires = item.get("requires-python")
        found.append(
            IndexFile(
                filename=item["filename"],
                requires_python=requires if isinstance(requires, str) and requires.strip() else None,
                yanked=bool(item.get("yanked")),  # False, or True / a reason
            )
        )
    return found


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
        if not filename:
            return
        requires = values.get("data-requires-python")
        self.files.append(
            IndexFile(
                filename=filename,
                requires_python=requires if requires and requires.strip() else None,
                yanked="data-yanked" in values,
            )
        )


def parse_html(text: str) -> list[IndexFile]:
    """The files of a PEP 503 HTML project page (attribute values are unescaped: ``&gt;=3.10``)."""
    parser = _Anchors()
    parser.feed(text)
    parser.close()
    return parser.files


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


def _read_http_index(index_url: str, project: str, timeout: float) -> tuple[bytes, str] | None:
    url = f"{index_url.rstrip('/')}/{project}/"
    deadline = time.monotonic() + 4 * timeout
    try:
        with urllib.request.urlopen(_request(url), timeout=timeout) as response:
            chunks, size = [], 0
            while chunk := response.read(1 << 20):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_PAGE_BYTES or time.monotonic() > deadline:
                    raise OSError("the page is too large or too slow to arrive")
            return b"".join(chunks), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410):
            return None  # the index does not hold this project
        raise IndexUnreachable(f"cannot read the package index {shown_url(index_url)}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise IndexUnreachable(f"cannot reach the package index {shown_url(index_url)}: {reason}") from None


def project_files(index_url: str, name: str, timeout: float = DEFAULT_TIMEOUT) -> list[IndexFile]:
    """Every file of project ``name`` on the index (none when it does not hold the project)."""
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
    payload, content_type = page
    try:
        if content_type.split(";")[0].strip() == JSON_TYPE:
            return parse_json(payload)
        return parse_html(payload.decode("utf-8", errors="replace"))
    except (ValueError, UnicodeDecodeError) as exc:
        where = shown_url(index_url)
        raise IndexUnreachable(f"the package index {where} sent an unreadable page for {project}: {exc}") from None
