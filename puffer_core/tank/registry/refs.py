"""A registry repository as ``puffer tank push`` / ``pull`` name it, the tags they use, and whether it answers.

``--registry HOST[:PORT]/NAME[/NAME...]`` names a repository in any OCI registry, host
first (``docker.io/USER/puffertank``, ``registry.example:5000/team/puffertank``,
``127.0.0.1:5000/puffertank``); the tags in it are chosen by the commands, never given:

- ``lock-<sha256>``: a final layer whose lock digest (``puffer tank lock``) is that sha256,
  ``lock-<sha256>-envs`` and ``lock-<sha256>-base`` the two layers it was built on;
- ``latest``, ``latest-envs``, ``latest-base``: the last push.

Tags are for people browsing the registry: what a box trusts is a manifest digest
(``REPO@sha256:…``, :mod:`~puffer_core.tank.registry.pins`). Every image name a command is given is
checked by :func:`image_reference` first.

:func:`probe_registry` asks the registry's address for any answer within seconds before
the engine is sent there: the engine itself waits up to 25 s on a registry that accepts
connections and never answers.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

from puffer_core.specs.images import ImageRef
from puffer_core.tank.box.protocol import image_reference
from puffer_core.tank.errors import TankError

__all__ = [
    "PROBE_SECONDS",
    "RegistryRef",
    "image_reference",
    "lock_tag",
    "parse_digest",
    "parse_local_tag",
    "parse_registry",
    "probe_registry",
    "registry_of",
]

#: How long the registry's address has to answer at all (connect, then any byte back).
PROBE_SECONDS = 10.0
_FORM = "give --registry HOST[:PORT]/NAME, e.g. 127.0.0.1:5000/puffertank or docker.io/USER/puffertank"
_HOST_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
#: A path component of a repository name (the distribution spec's grammar).
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RegistryRef:
    """A repository in a registry: ``host[:port]/path``."""

    host: str
    port: int | None
    path: str

    @property
    def address(self) -> str:
        """``host[:port]``: what ``docker login`` is given for this registry."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def repository(self) -> str:
        """``host[:port]/path``: the repository, no tag."""
        return f"{self.address}/{self.path}"

    def tag(self, name: str) -> str:
        """``host[:port]/path:name``, or ``host[:port]/path@sha256:…`` for a digest."""
        return f"{self.repository}{'@' if name.startswith('sha256:') else ':'}{name}"

    @property
    def is_loopback(self) -> bool:
        """On this machine: the engine reaches it over plain HTTP (127.0.0.0/8 and ::1 are insecure-allowed)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return self.repository


def _bad(given: str, why: str) -> TankError:
    return TankError(f"--registry {given!r}: {why}; {_FORM}")


def _parse_host(given: str, host: str) -> str:
    """The host part, lower case: a name of dot-separated labels, an IPv4 address or ``[IPv6]``."""
    if host.startswith("["):
        inner = host[1:-1] if host.endswith("]") else ""
        try:
            return str(ipaddress.IPv6Address(inner))
        except ValueError:
            raise _bad(given, f"{host!r} is not an IPv6 address in brackets") from None
    if not host:
        raise _bad(given, "the host is empty")
    if host != host.lower():
        raise _bad(given, f"{host!r} has upper case letters (registry names are lower case)")
    if any(not _HOST_LABEL.match(label) for label in host.split(".")):
        raise _bad(given, f"{host!r} is not a host name (letters, digits, '-' between dots)")
    if "." not in host and host != "localhost":
        raise _bad(
            given,
            f"{host!r} is not a registry host (a name with a dot, an address, localhost, or HOST:PORT); "
            "for Docker Hub write docker.io/USER/NAME",
        )
    return host


def _split_port(given: str, authority: str) -> tuple[str, int | None]:
    """``host:port`` → (host, port); the port 1-65535."""
    if authority.startswith("["):
        end = authority.find("]")
        host, rest = authority[: end + 1], authority[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            raise _bad(given, f"{authority!r} is not [IPv6] or [IPv6]:PORT")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text = authority.partition(":")
        port_text = port_text if colon else None
    if port_text is None:
        return host, None
    if not re.fullmatch(r"[0-9]{1,5}", port_text) or not 0 < int(port_text) < 65536:
        raise _bad(given, f"the port {port_text!r} is not a number from 1 to 65535")
    return host, int(port_text)


def parse_registry(given: str) -> RegistryRef:
    """``HOST[:PORT]/NAME[/NAME...]`` as a :class:`RegistryRef`; TankError naming what is wrong."""
    text = given.strip()
    if not text:
        raise _bad(given, "it is empty")
    if "://" in text:
        raise _bad(given, "no scheme: the engine chooses HTTPS, or HTTP for a registry on 127.0.0.1")
    if "@" in text:
        raise _bad(given, "it names a digest; name the repository only (the commands choose the tags)")
    authority, slash, path = text.partition("/")
    if not slash or not path:
        raise _bad(given, "no repository name after the host")
    if ":" in path:
        raise _bad(given, f"it names a tag ({path.rsplit(':', 1)[1]!r}); name the repository only (the commands "
                   "choose the tags: lock-<sha256>, latest)")  # fmt: skip
    host, port = _split_port(given, authority)
    host = _parse_host(given, host)
    components = path.split("/")
    for component in components:
        if not component:
            raise _bad(given, "an empty part between slashes")
        if component != component.lower():
            raise _bad(given, f"{component!r} has upper case letters (repository names are lower case)")
        if not _COMPONENT.match(component):
            raise _bad(given, f"{component!r} is not a repository name part (a-z, 0-9, and . _ - between them)")
    ref = RegistryRef(host, port, path)
    if len(ref.repository) > 255:
        raise _bad(given, "the name is longer than 255 characters")
    return ref


def lock_tag(digest: str, stage: str = "final") -> str:
    """The tag of a layer of the image whose lock digest is ``digest``."""
    return f"lock-{digest}" if stage == "final" else f"lock-{digest}-{stage}"


def parse_digest(given: str) -> str:
    """A lock digest as ``puffer tank lock`` prints it (64 hex digits; ``sha256:`` allowed)."""
    digest = given.strip().removeprefix("sha256:")
    if not _DIGEST.match(digest):
        raise TankError(
            f"--lock {given!r} is not a lock digest (64 lower-case hex digits, as `puffer tank lock IMAGE` "
            "prints after 'lock sha256')"
        )
    return digest


def parse_local_tag(given: str) -> tuple[str, str]:
    """``NAME[:TAG]`` of an image on this engine as (repository, tag); TAG defaults to latest."""
    ref = image_reference(given, "--tag")
    if ref.digest is not None:
        raise TankError(f"--tag {given!r} names a digest: a local name is NAME[:TAG], e.g. puffertank:latest")
    return ref.name, ref.tag or "latest"


def registry_of(image: ImageRef, option: str) -> RegistryRef:
    """The registry repository ``image`` (``HOST[:PORT]/NAME...``) is pulled from; TankError naming ``option``."""
    if "/" not in image.name:
        raise TankError(
            f"{option} {str(image)!r} names no registry: give HOST[:PORT]/NAME@sha256:DIGEST, "
            "as puffer tank push prints it"
        )
    try:
        return parse_registry(image.name)
    except TankError as exc:
        why = str(exc).partition(": ")[2].partition("; ")[0] or str(exc)
        raise TankError(f"{option} {str(image)!r} does not name a registry repository: {why}") from None


def probe_registry(ref: RegistryRef, seconds: float = PROBE_SECONDS) -> None:
    """TankError unless something at the registry's address answers within ``seconds``.

    An HTTP request in plain text is enough: a registry answers it (an HTTPS one with a
    400 or by closing), while nothing listening refuses and a dead host stays silent. With
    no port, HTTPS's 443 is tried, then 80 (an insecure registry; the only one on the loopback).
    """
    ports = [ref.port] if ref.port else ([80] if ref.is_loopback else [443, 80])
    reasons = []
    for port in ports:
        reason = _answers(ref.host, port, seconds)
        if reason is None:
            return
        reasons.append(reason)
    raise TankError(
        f"registry {ref.address} is not there: {'; '.join(reasons)}; start it, or check --registry "
        f"(and `docker login {ref.address}` if it needs credentials)"
    )


def _answers(host: str, port: int, seconds: float) -> str | None:
    """None when ``host:port`` answers an HTTP request within ``seconds``, else why not."""
    try:
        with socket.create_connection((host, port), timeout=seconds) as sock:
            sock.settimeout(seconds)
            sock.sendall(f"GET /v2/ HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            sock.recv(1)  # any byte, or the connection closed: something is there
    except ConnectionResetError:
        return None  # reset by a TLS-only server: something is there
    except ConnectionRefusedError:
        return f"nothing listens at {host}:{port} (connection refused)"
    except socket.gaierror as exc:
        return f"{host} does not resolve ({exc.strerror})"
    except TimeoutError:
        return f"{host}:{port} did not answer within {seconds:.0f} s"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"
    return None
