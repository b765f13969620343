"""`puffer fleet` without Ansible or boxes: the inventory's users checked as the playbook checks them,
and what root's `puffer fleet facts` makes of the run records users leave in their homes.
tests/tank/test_fleet_docker.py runs both against real boxes."""

from __future__ import annotations

import json
import os
import time

import pytest

from puffer_core.cli import fleet, fleet_facts
from puffer_core.train import runs

BOXES = ["box1", "box2", "box10"]


@pytest.mark.parametrize(
    ("users", "says"),
    [
        ({"alice": "box10"}, 'puffer_users: alice: "box10" is not a list of this inventory\'s boxes'),
        ({"alice": ["box3"]}, 'alice: ["box3"] is not a list of this inventory\'s boxes (box1, box2, box10)'),
        ({"alice": {"box1": True}}, 'alice: {"box1": true} is not a list'),
        ({"alice": [1]}, "alice: [1] is not a list"),
        ({"Alice!": ["box1"]}, 'puffer_users: "Alice!" is not a user name'),
        (["alice"], 'puffer_users is ["alice"], not a map of each user to a list of boxes'),
    ],
)
def test_a_users_boxes_must_be_a_list_of_the_inventorys_boxes(users, says):
    problem = fleet._users_problem(users, BOXES)
    assert problem is not None and says in problem


def test_a_good_map_of_users_passes():
    assert fleet._users_problem({"alice": ["box1"], "bob": ["box1", "box10"], "carol": []}, BOXES) is None


def _home(tmp_path):
    """A user's home as root sees it in `puffer fleet facts`: one good record and what else a user can leave."""
    home = tmp_path / "alice"
    registry = home.joinpath(*fleet_facts.REGISTRY)
    registry.mkdir(parents=True)
    good = {"format": runs.FORMAT, "out": str(home / "run"), "env": "classic/cartpole", "state": "running",
            "heartbeat": time.time(), "step": 10, "steps_total": 100}  # fmt: skip
    (registry / "good.json").write_text(json.dumps(good))
    (registry / "beat.json").write_text(json.dumps({**good, "heartbeat": "x"}))
    (registry / "started.json").write_text(json.dumps({**good, "started": [1]}))
    os.mkfifo(registry / "fifo.json")
    (registry / "shadow.json").symlink_to("/etc/shadow")
    return home


def test_root_reads_a_users_records_without_hanging_crashing_or_following_links(tmp_path):
    home = _home(tmp_path)
    problems: list[str] = []
    found = fleet_facts._runs(str(home), os.geteuid(), time.time(), problems)
    assert found == [{"out": str(home / "run"), "env": "classic/cartpole", "state": "running", "step": 10,
                      "steps": 100}]  # fmt: skip
    assert len(problems) == 4
    assert any("fifo.json: a FIFO" in line for line in problems)
    assert any("shadow.json: a symbolic link, not followed" in line for line in problems)
    assert any('beat.json: its heartbeat is "x"' in line for line in problems)
    assert any("started.json: its started is [1]" in line for line in problems)


def test_a_registry_reached_through_a_link_is_not_read(tmp_path):
    home = _home(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (home / ".local").rename(elsewhere)
    (home / ".local").symlink_to(elsewhere)  # e.g. to another user's home
    problems: list[str] = []
    assert fleet_facts._runs(str(home), os.geteuid(), time.time(), problems) == []
    assert problems == [f"{home.joinpath(*fleet_facts.REGISTRY)}: a symbolic link, not followed: not read"]
