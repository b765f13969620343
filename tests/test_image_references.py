"""puffer_core.specs.images: the one image-reference grammar, and the same answers as setup-host.sh's."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from puffer_core.specs.images import ImageRef, image_reference_problem, is_pinned, parse_image_reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "0f" * 32

GOOD = [
    ("puffertank", ImageRef("puffertank")),
    ("puffertank:latest", ImageRef("puffertank", "latest")),
    ("debian:12", ImageRef("debian", "12")),
    ("library/debian:bookworm-slim", ImageRef("library/debian", "bookworm-slim")),
    ("127.0.0.1:5000/puffertank", ImageRef("127.0.0.1:5000/puffertank")),
    ("localhost:5000/a/b-c/d_e.f:v1.2_x", ImageRef("localhost:5000/a/b-c/d_e.f", "v1.2_x")),
    (f"127.0.0.1:5000/puffertank@{DIGEST}", ImageRef("127.0.0.1:5000/puffertank", None, DIGEST)),
    (f"nvidia/cuda:12.4.1-runtime@{DIGEST}", ImageRef("nvidia/cuda", "12.4.1-runtime", DIGEST)),
    ("Registry.Example.org/pt__x:T", ImageRef("Registry.Example.org/pt__x", "T")),
]
BAD = [
    ("", "is empty"),
    ("--help", "starts with '-'"),
    ("-puffertank", "starts with '-'"),
    ("a b:x", "is not an image reference"),
    ("PufferTank", "is not an image reference"),
    ("pt:", "is not an image reference"),
    ("pt:-x", "is not an image reference"),
    ("a//b", "is not an image reference"),
    ("pt-", "is not an image reference"),
    ("pt@sha256:abc", "is not an image reference"),
    (f"pt@{DIGEST.upper()}", "is not an image reference"),
    ("pt;rm -rf /", "is not an image reference"),
    ("pt\n", "is not an image reference"),
    ("pt:" + "x" * 129, "is not an image reference"),
    ("a/" * 130 + "b", "characters long (at most 255)"),
]


@pytest.mark.parametrize(("given", "expected"), GOOD)
def test_references_are_parsed(given, expected):
    assert image_reference_problem(given) is None
    assert parse_image_reference(given) == expected
    assert str(expected) == given
    assert is_pinned(given) == (expected.digest is not None)


@pytest.mark.parametrize(("given", "says"), BAD)
def test_anything_else_is_refused_saying_why(given, says):
    problem = image_reference_problem(given)
    assert problem is not None and says in problem, problem
    with pytest.raises(ValueError, match=r"is|starts"):
        parse_image_reference(given)
    assert not is_pinned(given)


def test_not_a_string_is_refused():
    assert image_reference_problem(None) == "is a NoneType, not a string"
    assert not is_pinned(["pt"])


def test_setup_host_checks_with_the_same_grammar():
    """tank/setup-host.sh's valid_image, run by bash on every case above, agrees with Python."""
    script = (ROOT / "tank" / "setup-host.sh").read_text()
    start = script.index("valid_image() {")
    function = script[start : script.index("\n}\n", start) + 3]
    cases = [given for given, _ in GOOD + BAD if "\n" not in given]
    check = function + 'for ref in "$@"; do if valid_image "$ref"; then echo ok; else echo bad; fi; done\n'
    out = subprocess.run(["bash", "-c", check, "bash", *cases], capture_output=True, text=True, check=True).stdout
    by_bash = dict(zip(cases, out.split(), strict=True))
    by_python = {given: "ok" if image_reference_problem(given) is None else "bad" for given in cases}
    assert by_bash == by_python
