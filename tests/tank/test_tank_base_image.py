"""Layer 1's base image turned into an immutable reference."""

from __future__ import annotations

import pytest

from puffer_core.tank.image.base_image import pinned_reference

DIGEST = "sha256:" + "d" * 64


IMAGE_ID = "sha256:" + "1" * 64


@pytest.mark.parametrize(
    ("reference", "attrs", "expected"),
    [
        # Already pinned: as given, whatever the engine says.
        (f"debian:bookworm@{DIGEST}", {"Id": IMAGE_ID}, (f"debian:bookworm@{DIGEST}", "pinned as given")),
        (IMAGE_ID, {"Id": IMAGE_ID}, (IMAGE_ID, "pinned as given")),
        # A pulled tag: its registry digest, for the repository the tag names (Docker Hub spellings too).
        ("debian:bookworm", {"Id": IMAGE_ID, "RepoDigests": [f"debian@{DIGEST}"]}, (f"debian:bookworm@{DIGEST}",)),
        ("docker.io/library/debian:12", {"Id": IMAGE_ID, "RepoDigests": [f"debian@{DIGEST}"]},
         (f"docker.io/library/debian:12@{DIGEST}",)),
        ("localhost:5000/me/base:v1", {"Id": IMAGE_ID, "RepoDigests": [f"localhost:5000/me/base@{DIGEST}"]},
         (f"localhost:5000/me/base:v1@{DIGEST}",)),
        # A local image (docker import, or built here): no registry digest, so its image id.
        ("puffertank-debian:bookworm", {"Id": IMAGE_ID, "RepoDigests": []}, (IMAGE_ID,)),
        # Another repository's digest says nothing about this name.
        ("mybase:1", {"Id": IMAGE_ID, "RepoDigests": [f"debian@{DIGEST}"]}, (IMAGE_ID,)),
    ],
)  # fmt: skip
def test_base_image_becomes_an_immutable_reference(reference, attrs, expected):
    pinned, what = pinned_reference(reference, attrs)
    assert pinned == expected[0]
    if len(expected) > 1:
        assert what == expected[1]
    elif pinned == IMAGE_ID:
        assert what == "its image id: a local image has no registry digest"
