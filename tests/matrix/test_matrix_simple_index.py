"""One project's files from a simple index: PEP 691 JSON, PEP 503 HTML, file:// folders, real servers."""

from __future__ import annotations

import base64
import http.server
import json

import pytest
from local_index import closed_port, serve, write_index, write_project_page

from puffer_core.matrix.simple_index import (
    JSON_TYPE,
    IndexFile,
    IndexUnreachable,
    parse_html,
    parse_json,
    project_files,
)

JSON_PAGE = {
    "meta": {"api-version": "1.1"},
    "name": "demo",
    "files": [
        {"filename": "demo-1.0-py3-none-any.whl", "url": "x", "hashes": {}, "requires-python": ">=3.10"},
        {"filename": "demo-1.1.tar.gz", "url": "x", "hashes": {}, "yanked": "broken build"},
        {"filename": "demo-1.2-py3-none-any.whl", "url": "x", "hashes": {}, "yanked": False, "requires-python": ""},
    ],
}


def test_parse_json_reads_requires_python_and_yanked():
    files = parse_json(json.dumps(JSON_PAGE).encode())
    assert files == [
        IndexFile("demo-1.0-py3-none-any.whl", ">=3.10", False),
        IndexFile("demo-1.1.tar.gz", None, True),  # a yank reason counts as yanked
        IndexFile("demo-1.2-py3-none-any.whl", None, False),
    ]
    with pytest.raises(ValueError, match="no 'files' list"):
        parse_json(b'{"name": "demo"}')


def test_parse_html_unescapes_attributes_and_sees_yanked():
    page = """<!DOCTYPE html><html><body>
    <a href="../../files/demo-1.0.tar.gz#sha256=ab" data-requires-python="&gt;=3.10,&lt;3.14">demo-1.0.tar.gz</a>
    <a href="https://files.example/x/demo-1.1-py3-none-any.whl" data-yanked="">demo-1.1-py3-none-any.whl</a>
    <a href="demo%2B-2.0.zip">odd</a>
    <a name="anchor-without-href">nothing</a>
    </body></html>"""
    assert parse_html(page) == [
        IndexFile("demo-1.0.tar.gz", ">=3.10,<3.14", False),
        IndexFile("demo-1.1-py3-none-any.whl", None, True),
        IndexFile("demo+-2.0.zip", None, False),  # the URL's last part, unquoted
    ]


def test_file_index_folder(tmp_path):
    simple = write_index(tmp_path, "Puffer_Test.Follow", ["1.0", "1.1"])
    files = project_files(simple.as_uri(), "puffer-test-follow")
    assert [f.filename for f in files] == [
        "puffer_test_follow-1.0-py3-none-any.whl",
        "puffer_test_follow-1.1-py3-none-any.whl",
    ]
    assert {f.requires_python for f in files} == {">=3.8"}
    assert project_files(simple.as_uri(), "not-there") == []  # the index does not hold it
    with pytest.raises(IndexUnreachable, match="is not a folder"):
        project_files((tmp_path / "missing").as_uri(), "puffer-test-follow")


def test_http_index_html_and_missing_project(tmp_path):
    write_index(tmp_path, "puffer-test-follow", ["1.0"])
    with serve(tmp_path) as url:
        files = project_files(f"{url}/simple", "puffer-test-follow", timeout=5)
        assert [f.filename for f in files] == ["puffer_test_follow-1.0-py3-none-any.whl"]
        assert project_files(f"{url}/simple/", "nope", timeout=5) == []  # 404: not held


class _JsonHandler(http.server.BaseHTTPRequestHandler):
    """Answers JSON when asked for it, and records the Authorization header it got."""

    seen: list[tuple[str, str | None, str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append((self.path, self.headers.get("Accept"), self.headers.get("Authorization")))
        if self.path == "/simple/demo/" and JSON_TYPE in (self.headers.get("Accept") or ""):
            body = json.dumps(JSON_PAGE).encode()
            self.send_response(200)
            self.send_header("Content-Type", JSON_TYPE)
        elif self.path == "/simple/broken/":
            body = b"oops"
            self.send_response(500)
        else:
            body = b"not found"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_http_index_json_with_credentials_sent_and_never_shown(tmp_path):
    _JsonHandler.seen = []
    with serve(tmp_path, _JsonHandler) as url:
        secret_url = url.replace("http://", "http://me:s3cret@") + "/simple"
        files = project_files(secret_url, "Demo", timeout=5)
        assert [f.filename for f in files] == [
            "demo-1.0-py3-none-any.whl",
            "demo-1.1.tar.gz",
            "demo-1.2-py3-none-any.whl",
        ]
        path, accept, auth = _JsonHandler.seen[0]
        assert path == "/simple/demo/" and accept.startswith(JSON_TYPE)
        assert auth == "Basic " + base64.b64encode(b"me:s3cret").decode()
        with pytest.raises(IndexUnreachable) as failed:
            project_files(secret_url, "broken", timeout=5)
    message = str(failed.value)
    assert "HTTP 500" in message and url in message and "s3cret" not in message and "me:" not in message


def test_unreachable_index_is_one_line_naming_it():
    url = f"http://user:pw@127.0.0.1:{closed_port()}/simple"
    with pytest.raises(IndexUnreachable) as failed:
        project_files(url, "demo", timeout=5)
    message = str(failed.value)
    assert message.startswith(f"cannot reach the package index {url.replace('user:pw@', '')}")
    assert "--index URL" in message and "pw" not in message and "\n" not in message
    with pytest.raises(IndexUnreachable, match="not an http"):
        project_files("ftp://127.0.0.1/simple", "demo")


def test_a_plain_folder_page_is_html(tmp_path):
    write_project_page(tmp_path, "demo", [("demo-2.0.tar.gz", "<3.14", True)])
    assert project_files((tmp_path / "simple").as_uri(), "demo") == [IndexFile("demo-2.0.tar.gz", "<3.14", True)]
