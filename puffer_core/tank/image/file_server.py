"""Files served to a build on this machine's loopback: the CA bundle (``--ca-cert``) and a lock (``--lock``).

For builds behind a TLS-intercepting proxy, the bundle is served on the host's loopback
for the length of the build (a tiny HTTP server in this process) and each download step
fetches it into the build container's ``/dev/shm`` through ``tank/puffertank-ca.sh``,
checks its SHA-256 and deletes it when the step ends: it never enters a layer, and the
image history holds only the URL (which names the bundle's digest, so the layer cache
stays valid). A lock is served the same way. Because the server listens on 127.0.0.1, a
build that fetches from it needs ``--network host``.
"""

from __future__ import annotations

import hashlib
import http.server
import pathlib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from puffer_core.tank.errors import TankError

__all__ = ["serve_ca_bundle", "serve_files"]


@contextmanager
def serve_ca_bundle(path: pathlib.Path) -> Iterator[str]:
    """Serve the bundle at ``http://127.0.0.1:PORT/<sha256>.pem`` while the block runs."""
    data = path.read_bytes()
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise TankError(f"--ca-cert {path}: no PEM certificate in it (give a CA bundle such as ca-certificates.crt)")
    with serve_files({".pem": data}) as urls:
        yield urls[".pem"]


@contextmanager
def serve_files(files: Mapping[str, bytes]) -> Iterator[dict[str, str]]:
    """Serve each file at ``http://127.0.0.1:PORT/<sha256><ext>`` while the block runs.

    ``files`` maps an extension (``.pem``, ``.txt``) to the bytes; the result maps it to the
    URL. The port is derived from the digests, so the same files get the same URLs (and
    the layer cache hits) build after build; a busy port moves on to the next one.
    """
    routes = {f"/{hashlib.sha256(data).hexdigest()}{ext}": data for ext, data in files.items()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = routes.get(self.path)
            if data is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    first = 40000 + int(next(iter(routes))[1:9], 16) % 20000  # from the first file's digest
    server = None
    for port in range(first, first + 50):
        try:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
            break
        except OSError:
            continue
    if server is None:
        raise TankError(f"no free port on 127.0.0.1 between {first} and {first + 49} to serve the build's files")
    thread = threading.Thread(target=server.serve_forever, name="puffertank-files", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield {ext: base + route for route, ext in zip(routes, files, strict=True)}
    finally:
        server.shutdown()
        server.server_close()
