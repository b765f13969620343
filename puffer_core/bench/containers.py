"""What a container of this machine's tests and benches needs of it: the debootstrapped Debian 12
base image, and the way to the package index (the CA bundle pip trusts, pip's index settings).

Where a TLS-intercepting proxy signs what pip fetches, a container needs the machine's CA
bundle too: :func:`machine_ca` names it and :data:`CONTAINER_CA` is where containers mount it.
"""

from __future__ import annotations

import os
import pathlib

__all__ = ["BASE_IMAGE", "CONTAINER_CA", "ROOT", "SYSTEM_CA", "machine_ca", "machine_pip_env"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE_IMAGE = os.environ.get("PUFFERTANK_DEBIAN_IMAGE", "puffertank-debian:bookworm")
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"
CONTAINER_CA = "/run/puffer-host-ca.crt"


def machine_ca() -> str | None:
    """The CA bundle pip trusts on this machine (``PUFFERTANK_CA_CERT``, else the system's):
    where a TLS-intercepting proxy signs what pip fetches, a container needs it too."""
    return os.environ.get("PUFFERTANK_CA_CERT") or (SYSTEM_CA if os.path.isfile(SYSTEM_CA) else None)


def machine_pip_env() -> dict[str, str]:
    """pip's settings of this machine that a container can use: its index, timeout and proxies
    (not ``file:`` URLs: a local folder is not the container's), and ``PIP_CERT`` naming
    :data:`CONTAINER_CA` where :func:`machine_ca` has a bundle to mount there."""
    env = {"PIP_CERT": CONTAINER_CA} if machine_ca() else {}
    for key in ("PIP_INDEX_URL", "PIP_DEFAULT_TIMEOUT", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        value = os.environ.get(key)
        if value and not value.startswith("file:"):
            env[key] = value
    return env
