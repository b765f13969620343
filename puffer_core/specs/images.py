"""Image references: the one grammar every image name given to Docker is checked against.

``[DOMAIN[:PORT]/]PATH[:TAG][@sha256:DIGEST]``: the distribution spec's reference grammar
(lower-case path components joined by ``.``, ``_``, ``__`` or dashes; a tag of at most 128
word characters, dots and dashes; a sha256 digest of 64 lower-case hex digits), at most 255
characters. ``tank/setup-host.sh`` checks ``--image`` with the same expression (its
``valid_image``), so the box's image file holds nothing the Python side would refuse.

Why a check of our own before Docker sees a name: a value starting with ``-`` becomes an
option of the ``docker`` command (``--image=--help``), and a name Docker refuses only after a
pull (``'a b:x'``) leaves the pulled image behind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["IMAGE_REFERENCE_RE", "ImageRef", "image_reference_problem", "is_pinned", "parse_image_reference"]

_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
#: The whole reference; groups ``name`` (domain and path), ``tag`` and ``digest`` (``sha256:…``).
IMAGE_REFERENCE_RE = re.compile(
    rf"(?P<name>(?:{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?/)?{_PART}(?:/{_PART})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)
MAX_LENGTH = 255
FORM = "[HOST[:PORT]/]NAME[:TAG][@sha256:DIGEST], e.g. puffertank:latest or 127.0.0.1:5000/puffertank@sha256:…"


@dataclass(frozen=True)
class ImageRef:
    """A checked image reference: ``name`` (host and path), and a ``tag`` and/or ``digest`` (``sha256:…``)."""

    name: str
    tag: str | None = None
    digest: str | None = None

    @property
    def pinned(self) -> bool:
        """Named by the digest of its content (what Docker verifies when it pulls it)."""
        return self.digest is not None

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"


def image_reference_problem(text: object) -> str | None:
    """Why ``text`` is not an image reference, or None when it is one."""
    if not isinstance(text, str):
        return f"is a {type(text).__name__}, not a string"
    if not text:
        return "is empty"
    if len(text) > MAX_LENGTH:
        return f"is {len(text)} characters long (at most {MAX_LENGTH})"
    if text.startswith("-"):
        return "starts with '-' (it would be read as an option)"
    if IMAGE_REFERENCE_RE.fullmatch(text) is None:
        return f"is not an image reference ({FORM})"
    return None


def parse_image_reference(text: str) -> ImageRef:
    """``text`` as an :class:`ImageRef`; ValueError saying why when it is not one."""
    problem = image_reference_problem(text)
    if problem is not None:
        raise ValueError(f"{text!r} {problem}")
    found = IMAGE_REFERENCE_RE.fullmatch(text)
    assert found is not None  # checked above
    return ImageRef(found["name"], found["tag"], found["digest"])


def is_pinned(text: object) -> bool:
    """``text`` is an image reference with a digest (``NAME[:TAG]@sha256:…``): it names bytes."""
    return image_reference_problem(text) is None and parse_image_reference(str(text)).pinned
