"""The index client against hostile servers on 127.0.0.1: what it refuses, where credentials go, when it gives up.

Each test reproduces an attack first (a real server doing it), then checks the client's answer.
The "other host" of a redirect is ``localhost`` on another port: another origin, same machine.
"""

from __future__ import annotations

import base64
import contextlib
import html
import http.server
import json
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner
from local_index import serve
from test_matrix_discover import PACKAGE, write_follow_plugin

from puffer_core.cli.matrix import matrix
from puffer_core.matrix.discover import discover_releases
from puffer_core.matrix.discovered import SCHEMA, load_discovered
from puffer_core.matrix.releases import releases_from_files
from puffer_core.matrix.simple_index import (
    JSON_TYPE,
    MAX_REDIRECTS,
    IndexUnreachable,
    keeps_credentials,
    parse_html,
    parse_json,
    project_files,
    redirect_problem,
    requires_python_problem,
)
from puffer_core.matrix.sources import discover as discover_plugins

PAGE = {"meta": {"api-version": "1.1"}, "name": "demo", "files": [{"filename": "demo-1.0.tar.gz", "url": "x"}]}
BASIC = "Basic " + base64.b64encode(b"me:s3cret").decode()
JSON = {"Content_Type": JSON_TYPE}


class Seen:
    """What one server was asked: (path, Authorization header) per request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []


def handler(seen: Seen, answer: Callable[[http.server.BaseHTTPRequestHandler], None]) -> type:
    """A request handler that records each request in ``seen`` and lets ``answer`` reply."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.requests.append((self.path, self.headers.get("Authorization")))
            answer(self)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def reply(req: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str) -> None:
    req.send_response(status)
    for name, value in headers.items():
        req.send_header(name.replace("_", "-"), value)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


def json_page(req: http.server.BaseHTTPRequestHandler) -> None:
    reply(req, 200, json.dumps(PAGE).encode(), Content_Type=JSON_TYPE)


def redirect_to(location: str) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    return lambda req: reply(req, 302, Location=location)


def with_credentials(url: str) -> str:
    return url.replace("://", "://me:s3cret@", 1)


def one_line_without_secret(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and "s3cret" not in message and "me:" not in message
    return message


# -- credentials and redirects ------------------------------------------------------------------


@pytest.mark.parametrize("location_credentials", [False, True], ids=["plain", "credentials-in-location"])
def test_a_redirect_to_another_host_gets_no_credentials(tmp_path, location_credentials):
    first, other = Seen(), Seen()
    with serve(tmp_path, handler(other, json_page)) as other_url:
        target = other_url.replace("127.0.0.1", "localhost") + "/simple/demo/"
        if location_credentials:  # the server hands out credentials of its own: never used either
            target = with_credentials(target)
        with serve(tmp_path, handler(first, redirect_to(target))) as url:
            files = project_files(with_credentials(url) + "/simple", "demo", timeout=5)
    assert [f.filename for f in files] == ["demo-1.0.tar.gz"]  # the redirect was followed
    assert first.requests == [("/simple/demo/", BASIC)]  # the index itself got them
    assert other.requests == [("/simple/demo/", None)]  # localhost:P2 is another origin


def test_a_redirect_that_bypasses_the_proxy_gets_no_proxy_credentials(tmp_path, monkeypatch):
    """The proxy's credentials (http_proxy=http://user:pass@…) go to the proxy: a redirect to a host
    no_proxy names is fetched directly, and that host must not see Proxy-Authorization."""
    through_proxy, direct = [], []

    def recorder(seen: list, answer: Callable) -> type:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("Proxy-Authorization")))
                answer(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    with serve(tmp_path, recorder(direct, json_page)) as other_url:
        target = other_url.replace("127.0.0.1", "localhost") + "/simple/demo/"
        # The proxy answers for the index it stands for: a redirect to a host it does not serve.
        with serve(tmp_path, recorder(through_proxy, redirect_to(target))) as proxy_url:
            monkeypatch.setenv("http_proxy", proxy_url.replace("://", "://proxyuser:pr0xy@"))
            monkeypatch.setenv("no_proxy", "localhost")
            for name in ("HTTP_PROXY", "NO_PROXY", "all_proxy", "ALL_PROXY"):
                monkeypatch.delenv(name, raising=False)
            files = project_files("http://index.invalid/simple", "demo", timeout=5)
    assert [f.filename for f in files] == ["demo-1.0.tar.gz"]
    proxy_basic = "Basic " + base64.b64encode(b"proxyuser:pr0xy").decode()
    assert through_proxy == [("http://index.invalid/simple/demo/", proxy_basic)]  # the proxy got them
    assert direct == [("/simple/demo/", None)]  # the host no_proxy names did not


def test_a_redirect_on_the_same_origin_keeps_credentials(tmp_path):
    seen = Seen()

    def answer(req: http.server.BaseHTTPRequestHandler) -> None:
        if req.path == "/simple/demo/":
            reply(req, 301, Location="/moved/demo/")
        else:
            json_page(req)

    with serve(tmp_path, handler(seen, answer)) as url:
        project_files(with_credentials(url) + "/simple", "demo", timeout=5)
    assert seen.requests == [("/simple/demo/", BASIC), ("/moved/demo/", BASIC)]


def test_the_redirect_rules():
    index = "https://me:s3cret@127.0.0.1:8443/simple/demo/"
    assert keeps_credentials(index, "https://127.0.0.1:8443/other/")
    assert keeps_credentials("http://a.test/x", "http://A.TEST:80/y")  # the default port is the same port
    for elsewhere in ("http://127.0.0.1:8443/x", "https://localhost:8443/x", "https://127.0.0.1:9443/x"):
        assert not keeps_credentials(index, elsewhere)  # scheme, host or port changed
    refused = redirect_problem(index, "http://localhost:8080/simple/demo/", 1)
    assert refused == (
        "the package index https://127.0.0.1:8443/simple/demo/ redirected to http://localhost:8080/simple/demo/: "
        "a redirect from https to http is refused (it would drop encryption)"
    )
    assert "not an http(s)" in redirect_problem(index, "file:///etc/passwd", 1)
    assert redirect_problem(index, "https://localhost/x", MAX_REDIRECTS) is None
    assert "more than 5 redirects" in redirect_problem(index, "https://localhost/x", MAX_REDIRECTS + 1)
    assert redirect_problem("http://127.0.0.1/x", "https://localhost/x", 1) is None  # upgrading is fine


def hops(seen: Seen) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """``/hop/N/demo/`` redirects to ``/hop/N-1/demo/``; ``/hop/0/demo/`` is the page."""

    def answer(req: http.server.BaseHTTPRequestHandler) -> None:
        left = int(req.path.split("/")[2])
        if left:
            reply(req, 302, Location=f"/hop/{left - 1}/demo/")
        else:
            json_page(req)

    return answer


def test_at_most_five_redirects(tmp_path):
    seen = Seen()
    with serve(tmp_path, handler(seen, hops(seen))) as url:
        assert [f.filename for f in project_files(f"{url}/hop/{MAX_REDIRECTS}", "demo", timeout=5)]
        assert len(seen.requests) == MAX_REDIRECTS + 1
        seen.requests.clear()
        with pytest.raises(IndexUnreachable) as refused:
            project_files(with_credentials(f"{url}/hop/{MAX_REDIRECTS + 1}"), "demo", timeout=5)
    message = one_line_without_secret(refused)
    assert message.startswith(f"the package index sent more than {MAX_REDIRECTS} redirects: {url}/hop/1/demo/")
    assert len(seen.requests) == MAX_REDIRECTS + 1  # the sixth redirect's target was never asked


def test_a_redirect_to_a_file_url_is_refused(tmp_path):
    seen = Seen()
    with serve(tmp_path, handler(seen, redirect_to("file:///etc/passwd"))) as url:
        with pytest.raises(IndexUnreachable) as refused:
            project_files(with_credentials(url) + "/simple", "demo", timeout=5)
    message = one_line_without_secret(refused)
    assert message.startswith(f"cannot read the package index {url}/simple: HTTP 302 (a redirect to a URL that is not")


# -- https → http, on a real TLS server ------------------------------------------------------------


@pytest.fixture
def tls_cert(tmp_path, monkeypatch) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (openssl), trusted by this process's default TLS context."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test certificate (test_the_redirect_rules covers the rule without TLS)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
    names = ["-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run([*request, *names, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read by ssl.create_default_context, as urllib uses it
    return str(cert), str(key)


@contextlib.contextmanager
def serve_tls(cert: tuple[str, str], handler_class: type) -> Iterator[str]:
    """``handler_class`` over TLS on 127.0.0.1; yields ``https://127.0.0.1:PORT``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_an_https_index_redirecting_to_http_is_refused(tmp_path, tls_cert):
    index, plain = Seen(), Seen()
    with serve(tmp_path, handler(plain, json_page)) as plain_url:
        target = plain_url.replace("127.0.0.1", "localhost") + "/simple/demo/"

        def answer(req: http.server.BaseHTTPRequestHandler) -> None:
            if req.path == "/simple/demo/":
                reply(req, 302, Location=target)
            else:
                json_page(req)

        with serve_tls(tls_cert, handler(index, answer)) as url:
            assert project_files(with_credentials(url) + "/ok", "demo", timeout=5)  # TLS itself works
            with pytest.raises(IndexUnreachable) as refused:
                project_files(with_credentials(url) + "/simple", "demo", timeout=5)
    message = one_line_without_secret(refused)
    assert message.startswith(f"the package index {url}/simple/demo/ redirected to {target}: ")
    assert "https to http is refused" in message
    assert index.requests == [("/ok/demo/", BASIC), ("/simple/demo/", BASIC)]
    assert plain.requests == []  # nothing was sent over plain http


# -- one deadline per request ---------------------------------------------------------------------


def trickle(headers_too: bool) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """A server that sends one byte every 0.2 s (each read gets something long before any read timeout)."""

    def answer(req: http.server.BaseHTTPRequestHandler) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {JSON_TYPE}\r\nContent-Length: 100000\r\n\r\n".encode()
        if not headers_too:
            req.wfile.write(head)
            head = b""
        stop = time.monotonic() + 15  # the server gives up on its own, whatever the client does
        for byte in (head + b"[" * 100000)[:200]:
            if time.monotonic() > stop:
                return
            try:
                req.wfile.write(bytes([byte]))
                req.wfile.flush()
            except OSError:
                return  # the client hung up: what the test wants
            time.sleep(0.2)

    return answer


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "status-and-headers"])
def test_a_trickling_server_is_cut_at_the_deadline(tmp_path, headers_too):
    seen = Seen()
    with serve(tmp_path, handler(seen, trickle(headers_too))) as url:
        start = time.monotonic()
        with pytest.raises(IndexUnreachable) as late:
            project_files(url + "/simple", "demo", timeout=1.5)
        took = time.monotonic() - start
    assert 1.4 <= took <= 1.5 + 1.0  # the deadline of the whole request, not of each read
    message = one_line_without_secret(late)
    assert message.startswith(f"the package index {url}/simple sent no complete page for demo within 1.5 s")


def test_the_deadline_covers_redirects(tmp_path):
    seen = Seen()

    def slow_hops(req: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(0.4)  # each answer is quick enough on its own; five of them are not
        hops(seen)(req)

    with serve(tmp_path, handler(seen, slow_hops)) as url:
        start = time.monotonic()
        with pytest.raises(IndexUnreachable, match="within 1 s"):
            project_files(f"{url}/hop/{MAX_REDIRECTS}", "demo", timeout=1)
        assert time.monotonic() - start <= 1 + 1.0


# -- pages that do not parse ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"[" * 100000, JSON_TYPE, "its JSON is nested too deeply"),
        (b'{"files": [' * 50000, JSON_TYPE, "its JSON is nested too deeply"),
        (b'{"files": [{"filename": "demo-\xff.tar.gz"}]}', JSON_TYPE, "'utf-8' codec can't decode byte 0xff"),
        (b'<a href="demo-\xfe.tar.gz">x</a>', "text/html", "'utf-8' codec can't decode byte 0xfe"),
        (b'{"files": [', JSON_TYPE, "Expecting value"),
        (b"1" * 5000, JSON_TYPE, "Exceeds the limit"),
    ],
    ids=["nested-array", "nested-object", "json-utf8", "html-utf8", "truncated", "huge-number"],
)
def test_a_page_that_does_not_parse_is_a_one_line_error(tmp_path, body, content_type, reason):
    seen = Seen()
    with serve(tmp_path, handler(seen, lambda req: reply(req, 200, body, Content_Type=content_type))) as url:
        with pytest.raises(IndexUnreachable) as unreadable:
            project_files(with_credentials(url) + "/simple", "demo", timeout=5)
    message = one_line_without_secret(unreadable)
    assert message.startswith(f"the package index {url}/simple sent an unreadable page for demo: ")
    assert reason in message and len(message) < 400


def test_a_garbled_status_line_is_a_one_line_error(tmp_path):
    def garbled(req: http.server.BaseHTTPRequestHandler) -> None:
        req.wfile.write(b"\x1b[31mNOT HTTP\x07\r\n\r\n")

    with serve(tmp_path, handler(Seen(), garbled)) as url:
        with pytest.raises(IndexUnreachable) as unreadable:
            project_files(url + "/simple", "demo", timeout=5)
    message = one_line_without_secret(unreadable)
    assert message.startswith(f"cannot reach the package index {url}/simple: ")
    assert "\x1b" not in message and "\x07" not in message  # the server's bytes never reach the terminal raw


# -- Requires-Python: checked before anything is kept ---------------------------------------------

ATTACK = "===<img/src=x/onerror=alert(1)>"  # a valid PEP 440 specifier (arbitrary equality)


@pytest.mark.parametrize(
    "value",
    [">=3.8", ">=3.6, <4", ">=2.7,!=3.0.*,!=3.1.*", "~=3.10", ">= 3.9", ">=3.6,", "==3.11.*", "<3.14.0rc1", "3.6"],
)
def test_real_requires_python_values_are_kept(value):
    assert requires_python_problem(value) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (ATTACK, "not a PEP 440 version specifier"),
        ("===<script>", "not a PEP 440 version specifier"),
        ("<img", "not a PEP 440 version specifier"),
        (">=3.8\n<b>", "not a PEP 440 version specifier"),
        (">=3.8 [x](javascript:y)", "not a PEP 440 version specifier"),
        (">=3.8," + ",".join(["!=3.0"] * 40), "over 200 characters"),
    ],
)
def test_other_requires_python_values_leave_their_file_out(value, problem):
    assert problem in requires_python_problem(value)
    page = {"files": [{"filename": "demo-1.0.tar.gz", "requires-python": value}, {"filename": "demo-1.1.tar.gz"}]}
    refused, kept = parse_json(json.dumps(page).encode())
    assert refused.requires_python is None and problem in refused.refused and kept.refused is None
    assert list(releases_from_files([refused, kept])) == ["1.1"]  # the refused file counts nowhere
    (anchor,) = parse_html(f'<a href="demo-1.0.tar.gz" data-requires-python="{html.escape(value)}">x</a>')
    assert anchor.requires_python is None and problem in anchor.refused


def test_discover_keeps_no_hostile_requires_python_and_says_so(tmp_path):
    plugins = tmp_path / "plugins"
    write_follow_plugin(plugins)
    wheels = {v: f"puffer_test_follow-{v}-py3-none-any.whl" for v in ("1.0", "1.1", "1.2")}
    page = {
        "files": [
            {"filename": wheels["1.0"], "requires-python": ">=3.8"},
            {"filename": wheels["1.1"], "requires-python": ATTACK},  # its only file: 1.1 is not discovered
            {"filename": wheels["1.2"], "requires-python": ">=3.8"},
        ]
    }
    out = tmp_path / "out"
    try:
        with serve(tmp_path, handler(Seen(), lambda req: reply(req, 200, json.dumps(page).encode(), **JSON))) as url:
            sources = discover_plugins(plugins, include_builtins=False)
            report = discover_releases(sources, out, f"{url}/simple", timeout=5)
            args = ["--index", f"{url}/simple", "--plugins-dir", str(plugins), "--no-builtins", "--out", str(out)]
            result = CliRunner().invoke(matrix, ["discover", *args, "--dry-run"], env={"COLUMNS": "300"})
    finally:
        sys.modules.pop("puffer_plugin_follow", None)  # the next test imports its own copy
    assert report.packages[PACKAGE].releases == ["1.2"] and report.packages[PACKAGE].refused == 1
    stored = (out / "discovered.json").read_text()
    assert "img" not in stored and "onerror" not in stored and '"requires_python": ">=3.8"' in stored
    assert result.exit_code == 0, result.output
    assert "1 file(s) left out: their Requires-Python is not a PEP 440 version specifier" in result.output
    assert "img" not in result.output


def test_a_hostile_requires_python_kept_before_the_check_is_dropped_on_reading(tmp_path):
    path = tmp_path / "discovered.json"
    files = [{"python": "any", "requires_python": ATTACK}, {"python": "source", "requires_python": ">=3.8"}]
    document = {"schema": SCHEMA, "packages": {"demo": {"followed_by": ["x"], "releases": {"1.0": {"files": files}}}}}
    path.write_text(json.dumps(document))
    release = load_discovered(path)["demo"]["1.0"]
    assert [f.requires_python for f in release.files] == [">=3.8"]
    assert release.install_problem("demo", "3.7") == "demo 1.0 declares Requires-Python >=3.8"
