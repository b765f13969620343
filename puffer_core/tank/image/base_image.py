"""Layer 1's FROM as exact bytes, never whatever a tag names at build time.

``--base-image`` is resolved on the engine before layer 1 is built: a reference already
pinned by digest stays as given, a tag becomes ``NAME@sha256:DIGEST`` (its registry
digest), and a local image with no registry digest (``docker import``, as
tank/ci-setup.sh makes) becomes its image id ``sha256:ID``. Layer 1 records it
(``/opt/puffertank/base-image.txt``, label ``org.puffer.tank.base-image``) and the lock
repeats it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from puffer_core.specs.images import is_pinned
from puffer_core.tank.errors import TankError

__all__ = ["IMAGE_ID", "pinned_reference", "resolve_base_image"]

IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")


def _repository(reference: str) -> str:
    """``docker.io/library/debian:12`` → ``debian``: the repository, tag and digest left off."""
    name = reference.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/"):
        name = name.removeprefix(prefix)
    return name.removeprefix("library/")


def pinned_reference(reference: str, attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The immutable form of ``reference``, given the engine's ``attrs`` of that image, and what it is.

    Already pinned (``NAME@sha256:…`` or an image id): as given. A tag: ``NAME@sha256:…``
    when the image came from a registry (its RepoDigests name that repository); otherwise
    (imported or built here) its image id, the only name for those bytes there is.
    """
    if is_pinned(reference) or IMAGE_ID.match(reference):
        return reference, "pinned as given"
    repository = _repository(reference)
    for repo_digest in attrs.get("RepoDigests") or []:
        name, _, digest = repo_digest.partition("@")
        if _repository(name) == repository and digest.startswith("sha256:"):
            return f"{reference.split('@', 1)[0]}@{digest}", "its registry digest"
    image_id = attrs.get("Id", "")
    if not IMAGE_ID.match(image_id):
        raise TankError(f"the engine reports no image id for {reference}; give --base-image NAME@sha256:DIGEST")
    return image_id, "its image id: a local image has no registry digest"


def resolve_base_image(client: Any, reference: str, out: Callable[[str, str], None]) -> str:
    """``reference`` as layer 1's immutable FROM (see :func:`pinned_reference`), pulled if need be."""
    import docker

    if is_pinned(reference):
        return reference  # the builder fetches exactly these bytes, or fails
    try:
        image = client.images.get(reference)
    except docker.errors.ImageNotFound:
        if IMAGE_ID.match(reference):
            raise TankError(
                f"base image {reference} is not on this engine: an image id names a local image, known only "
                "where it was made; give --base-image NAME@sha256:DIGEST or an image that is here"
            ) from None
        out("note", f"base: pulling {reference} to learn its digest")
        try:
            image = client.images.pull(reference)
        except docker.errors.APIError as exc:
            raise TankError(
                f"base image {reference} is not on this engine and could not be pulled "
                f"({str(exc).splitlines()[0][:160]}); pull or import it first, or give NAME@sha256:DIGEST"
            ) from None
    pinned, what = pinned_reference(reference, image.attrs)
    out("note", f"base: {reference} → {pinned} ({what})")
    return pinned
