"""The files a build fetches from the loopback: the CA bundle's and a lock's round trip through
tank/puffertank-ca.sh (served here, fetched by bash, checked against the digest, deleted when the step ends)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.file_server import serve_ca_bundle, serve_files

ROOT = pathlib.Path(__file__).resolve().parents[2]


CA_HELPER = ROOT / "tank" / "puffertank-ca.sh"


PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfixture\n-----END CERTIFICATE-----\n"


def test_ca_server_serves_the_bundle_under_its_digest(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(PEM)
    digest = hashlib.sha256(PEM).hexdigest()
    with serve_ca_bundle(bundle) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith(f"/{digest}.pem")
        with urllib.request.urlopen(url) as response:
            assert response.read() == PEM
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.replace(digest, "0" * 64))
        with serve_ca_bundle(bundle) as second:  # the same bundle twice: the next port
            assert second != url
    not_pem = tmp_path / "x.txt"
    not_pem.write_text("hello")
    with pytest.raises(TankError, match="no PEM certificate"):
        with serve_ca_bundle(not_pem):
            pass


BASH = shutil.which("bash")


def _step(script: str, url: str | None, **extra: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra}
    if url is not None:
        env["PUFFER_CA_URL"] = url
    return subprocess.run(
        [BASH, "-o", "pipefail", "-c", f". {CA_HELPER} && {script}"], env=env, capture_output=True, text=True
    )


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_ca_helper_fetches_checks_exports_and_deletes(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(PEM)
    with serve_ca_bundle(bundle) as url:
        proc = _step('cat "$PIP_CERT"; cat "$APT_CONFIG"; echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $PIP_CERT"', url)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(PEM.decode())
        conf_line = proc.stdout.splitlines()[3]
        assert conf_line.startswith('Acquire::https::CAInfo "') and conf_line.endswith('ca.pem";')
        paths = set(proc.stdout.splitlines()[-1].split())
        assert len(paths) == 1
        path = pathlib.Path(paths.pop())
        assert path.parent.name.startswith("puffer-ca.")
        assert not path.exists() and not path.parent.exists(), "the bundle must be gone when the step ends"
        # A step that fails still cleans up.
        failing = _step('echo "$PIP_CERT"; false', url)
        assert failing.returncode == 1 and not pathlib.Path(failing.stdout.strip()).exists()
        # A bundle that does not match the digest in the URL is refused.
        tampered = url.rsplit("/", 1)[0] + "/" + "0" * 64 + ".pem"
        bad = _step("echo never", tampered)
        assert bad.returncode == 1 and "never" not in bad.stdout
        assert "cannot fetch the CA bundle" in bad.stderr
    # Nobody listening (a build without --network host): a clear message, exit 1.
    gone = _step("echo never", url)
    assert gone.returncode == 1 and "--network host" in gone.stderr


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_ca_helper_does_nothing_without_a_url():
    proc = _step('echo "[${PIP_CERT:-unset}] [${APT_CONFIG:-unset}]"', None)
    assert proc.returncode == 0 and proc.stdout.strip() == "[unset] [unset]"


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_ca_helper_adds_a_served_lock_to_pip_constraint(tmp_path):
    """`puffer tank build --lock`: each pip step sees the lock in PIP_CONSTRAINT, after the
    layer's own constraints; the file is checked against its digest and gone after the step."""
    lock = b"# constraints\nnumpy==2.4.6\n"
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(PEM)
    with serve_files({".txt": lock}) as urls, serve_ca_bundle(bundle) as ca_url:
        url = urls[".txt"]
        assert url.endswith(f"/{hashlib.sha256(lock).hexdigest()}.txt")
        proc = _step('echo "$PIP_CONSTRAINT"; cat "${PIP_CONSTRAINT##* }"; echo "$PIP_CERT"', ca_url,
                     PUFFER_LOCK_URL=url, PIP_CONSTRAINT="/opt/puffertank/constraints-common.txt")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        first, *content, cert = proc.stdout.splitlines()
        common, locked = first.split()
        assert common == "/opt/puffertank/constraints-common.txt" and locked.endswith("/lock.txt")
        assert "\n".join(content) + "\n" == lock.decode()
        assert pathlib.Path(cert).parent == pathlib.Path(locked).parent  # one folder, one clean-up
        assert not pathlib.Path(locked).parent.exists()
        alone = _step('echo "$PIP_CONSTRAINT"', None, PUFFER_LOCK_URL=url)
        assert alone.returncode == 0 and alone.stdout.strip().endswith("/lock.txt") and " " not in alone.stdout.strip()
        tampered = _step("echo never", None, PUFFER_LOCK_URL=url.rsplit("/", 1)[0] + "/" + "0" * 64 + ".txt")
        assert tampered.returncode == 1 and "cannot fetch the lock" in tampered.stderr
    gone = _step("echo never", None, PUFFER_LOCK_URL=url)
    assert gone.returncode == 1 and "builds with --lock need host networking" in gone.stderr
