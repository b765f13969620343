"""A real package index for the discovery tests: pure wheels built here, in PEP 503's layout, on 127.0.0.1."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import http.server
import pathlib
import threading
import zipfile
from collections.abc import Iterator

from packaging.utils import canonicalize_name


def build_wheel(folder: pathlib.Path, name: str, version: str, requires_python: str | None = None) -> pathlib.Path:
    """A pure ``py3-none-any`` wheel of one module ``<name>`` whose ``VERSION`` is ``version``."""
    module = canonicalize_name(name).replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        metadata += f"Requires-Python: {requires_python}\n"
    files = {
        f"{module}/__init__.py": f'"""A test package of the matrix discovery tests."""\n\nVERSION = "{version}"\n',
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def write_project_page(root: pathlib.Path, name: str, files: list[tuple[str, str | None, bool]]) -> None:
    """``<root>/simple/<name>/index.html`` listing ``(filename, requires_python, yanked)`` from ``../../files/``."""
    project = root / "simple" / canonicalize_name(name)
    project.mkdir(parents=True, exist_ok=True)
    anchors = []
    for filename, requires, yanked in files:
        attrs = f'href="../../files/{filename}"'
        if requires:
            attrs += f' data-requires-python="{html.escape(requires)}"'
        if yanked:
            attrs += ' data-yanked=""'
        anchors.append(f"<a {attrs}>{filename}</a><br/>")
    (project / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(anchors) + "\n</body></html>\n")


def write_index(root: pathlib.Path, name: str, versions: list[str]) -> pathlib.Path:
    """A PEP 503 index under ``root`` holding a pure wheel of ``name`` at each version; returns ``root/simple``."""
    wheels = [build_wheel(root / "files", name, version) for version in versions]
    write_project_page(root, name, [(wheel.name, ">=3.8", False) for wheel in wheels])
    return root / "simple"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(root: pathlib.Path, handler: type[http.server.BaseHTTPRequestHandler] | None = None) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 (a free port) while inside; yields ``http://127.0.0.1:PORT``."""
    if handler is None:

        class handler(_Quiet):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
