"""The tank's plans without an engine: what `puffer tank build`, `push` and `pull` decide from their options,
and the one line naming the option at fault (the CLI only parses and prints: tests/cli/test_cli_errors.py)."""

from __future__ import annotations

import pytest

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.plan import BuildRequest, plan_build
from puffer_core.tank.registry.plan import plan_pull, plan_push

PINNED = "127.0.0.1:5000/puffertank@sha256:" + "ab" * 32


def test_a_pull_by_digest_is_verified_and_names_the_boxs_image():
    plan = plan_pull(PINNED)
    assert plan.verified and plan.digest == "sha256:" + "ab" * 32 and plan.local == "puffertank:latest"
    assert str(plan.registry) == "127.0.0.1:5000/puffertank"
    assert plan_pull(PINNED, local="mine:v1").local == "mine:v1"


def test_a_pull_by_tag_only_looks():
    plan = plan_pull(None, registry="127.0.0.1:5000/puffertank", lock="cd" * 32)
    assert not plan.verified and plan.local is None and plan.expected_lock == "cd" * 32


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({}, "give one of REPO@sha256:DIGEST, --pins FILE or --registry REG (none given)"),
        ({"image": PINNED, "registry": "127.0.0.1:5000/x"}, "(IMAGE, --registry given)"),
        ({"image": PINNED, "lock": "ab" * 32}, "--lock goes with --registry REG"),
        ({"registry": "127.0.0.1:5000/x", "local": "x:1"}, "--tag: a pull by tag is unverified"),
        ({"image": "127.0.0.1:5000/puffertank:latest"}, "names no digest, and a tag names whatever was pushed"),
        ({"image": "--help"}, "IMAGE '--help' starts with '-'"),
    ],
)
def test_a_pull_that_cannot_be_done_is_one_line_naming_the_option(args, says):
    with pytest.raises(TankError) as caught:
        plan_pull(args.pop("image", None), **args)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_push_checks_its_names_first():
    assert plan_push("puffertank:latest", "127.0.0.1:5000/pt").image == "puffertank:latest"
    with pytest.raises(TankError, match="IMAGE 'Not Valid'"):
        plan_push("Not Valid", "127.0.0.1:5000/pt")


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        (BuildRequest(torch="torch==2.5.1", no_torch=True), "give --torch REQUIREMENT or --no-torch, not both"),
        (BuildRequest(from_registry="127.0.0.1:5000/pt"), "--from-registry REG and --pins FILE go together"),
        (BuildRequest(base_image="--privileged"), "--base-image '--privileged' starts with '-'"),
        (BuildRequest(tag="Bad Tag"), "Bad Tag"),
    ],
)
def test_a_build_that_cannot_be_planned_says_why_before_the_engine_is_asked(request_, says):
    notes: list[tuple[str, str]] = []
    with pytest.raises(TankError) as caught:
        plan_build(request_, lambda kind, text: notes.append((kind, text)))
    assert says in str(caught.value)


def test_a_build_plan_takes_the_machines_build_arguments_and_the_given_ones():
    notes: list[tuple[str, str]] = []
    plan, selection = plan_build(
        BuildRequest(stage="final", build_args={"EXTRA": "1"}, tag="pt"), lambda *n: notes.append(n)
    )
    assert plan.stages == ("final",) and plan.build_args["EXTRA"] == "1" and plan.tags["final"] == "pt:latest"
    assert selection.layers and all(kind in ("dim", "note", "warning") for kind, _ in notes)
