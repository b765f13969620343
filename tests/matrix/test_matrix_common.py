"""The common set: the newest passing cells that agree, and constraints-common.txt."""

from __future__ import annotations

import json

from matrix_samples import record

from puffer_core.matrix import common


def test_common_takes_the_newest_passing_cells_that_agree():
    records = [
        record("atari", "0.11", {"gymnasium": "1.1.1"}, package="ale-py"),
        record("atari", "0.10", {"gymnasium": "1.0.0"}, package="ale-py"),
        record("nethack", "1.3", {"gymnasium": "1.2.0"}, outcome="smoke-failed", package="nle"),
        record("nethack", "1.2", {"gymnasium": "1.0.0"}, package="nle"),
        record("nethack", "1.1", {"gymnasium": "1.0.0"}, python="3.12", package="nle"),
        record("pz", "1.27", {"gymnasium": "1.2.0"}, package="pettingzoo"),
        record("dmlab", "1.0", {}, outcome="install-failed"),
        record("classic", "1.0.0", {}, package="gymnasium"),
        record("classic", "1.2.0", {}, package="gymnasium"),
    ]
    plan = common.choose_common(records, ["atari", "classic", "dmlab", "nethack", "pz"], builtins=["classic"])
    chosen = {c.plugin: c for c in plan.members}
    # As many plugins as agree: nethack's only passing cell on 3.11 pins gymnasium 1.0.0, so
    # atari takes its older cell on 1.0.0 rather than leave nethack out; classic joins on 1.0.0.
    assert list(chosen) == ["atari", "nethack", "classic"]
    assert chosen["atari"].pins == {"ale-py": "0.10", "gymnasium": "1.0.0"} and not chosen["atari"].newest
    assert chosen["nethack"].pins == {"nle": "1.2", "gymnasium": "1.0.0"} and chosen["nethack"].newest
    assert chosen["classic"].pins == {"gymnasium": "1.0.0"}
    assert "gymnasium==1.2.0 (set has 1.0.0 from atari)" in plan.dropped["pz"]
    assert "no passing cell" in plan.dropped["dmlab"] and "install-failed" in plan.dropped["dmlab"]
    # Between sets of as many plugins, each plugin's newest environment package, in priority order.
    plan = common.choose_common(records, ["atari", "classic"], builtins=["classic"])
    assert [c.pins for c in plan.members] == [{"ale-py": "0.10", "gymnasium": "1.0.0"}, {"gymnasium": "1.0.0"}]
    records.append(record("classic", "1.1.1", {}, package="gymnasium"))
    plan = common.choose_common(records, ["atari", "classic"], builtins=["classic"])
    assert [c.pins for c in plan.members] == [{"ale-py": "0.11", "gymnasium": "1.1.1"}, {"gymnasium": "1.1.1"}]


def test_a_plugin_keeps_its_newest_release_over_a_newer_companion_for_another():
    """What the index did: ale-py 0.12.1 passes on gymnasium 1.4.0, but nle 1.3.0 pins 1.2.0, and
    nle 0.9.1 (gym, no gymnasium pin) would agree with 1.4.0. The set keeps nle 1.3.0."""
    records = [
        record("atari", "0.12.1", {"gymnasium": "1.4.0"}, package="ale-py"),
        record("atari", "0.12.1", {"gymnasium": "1.2.0"}, package="ale-py"),
        record("nethack", "1.3.0", {"gymnasium": "1.2.0"}, package="nle"),
        record("nethack", "0.9.1", {"gym": "0.23.0"}, package="nle"),
        record("classic", "1.4.0", {}, package="gymnasium"),
        record("classic", "1.2.0", {}, package="gymnasium"),
    ]
    for r, axis in zip(records[:2], ("1.4.0", "1.2.0")):
        r.id, r.axes = f"{r.id}-gymnasium{axis}", {"gymnasium": axis}
    plan = common.choose_common(records, ["atari", "nethack", "classic"], builtins=["classic"])
    assert [c.pins for c in plan.members] == [
        {"ale-py": "0.12.1", "gymnasium": "1.2.0"},
        {"nle": "1.3.0", "gymnasium": "1.2.0"},
        {"gymnasium": "1.2.0"},
    ]
    assert not plan.dropped


def test_past_the_combination_bound_the_set_is_chosen_greedily(monkeypatch):
    records = [
        record("atari", "0.11", {"gymnasium": "1.1.1"}, package="ale-py"),
        record("nethack", "1.2", {"gymnasium": "1.0.0"}, package="nle"),
    ]
    records.append(record("atari", "0.10", {"gymnasium": "1.0.0"}, package="ale-py"))
    monkeypatch.setattr(common, "MAX_COMBINATIONS", 1)
    plan = common.choose_common(records, ["atari", "nethack"])
    assert [c.plugin for c in plan.members] == ["atari"] and "gymnasium==1.0.0" in plan.dropped["nethack"]


def test_constraints_file_is_deterministic_and_says_it_is_generated():
    section = {
        "python": "3.11",
        "members": [
            {
                "plugin": "atari",
                "pins": {"ale-py": "0.11.2", "gymnasium": "1.1.1"},
                "distribution": "puffer-plugin-atari",
            }
        ],
        "dropped": {"dmlab": "no passing cell"},
        "joint": {
            "id": "common-py3.11",
            "outcome": "pass",
            "resolved": {"numpy": "2.2.6", "gymnasium": "1.1.1", "puffer-plugin-atari": "0.1.0"},
        },
    }
    text = common.constraints_text(section)
    assert text == common.constraints_text(json.loads(json.dumps(section)))
    assert text.startswith("# GENERATED")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == ["ale-py==0.11.2", "gymnasium==1.1.1", "numpy==2.2.6", "puffer-plugin-atari==0.1.0"]
    assert "#   dmlab: no passing cell" in text
