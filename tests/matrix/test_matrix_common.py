"""The common set: the newest passing cells that agree, and constraints-common.txt."""

from __future__ import annotations

import json

from matrix_samples import record

from puffer_core.matrix import common


def test_common_takes_the_newest_passing_cells_that_agree():
    records = [
        record("atari", "0.11", {"gymnasium": "1.1.1"}),
        record("atari", "0.10", {"gymnasium": "1.0.0"}),
        record("nethack", "1.3", {"gymnasium": "1.2.0"}, outcome="smoke-failed"),
        record("nethack", "1.2", {"gymnasium": "1.0.0"}),
        record("nethack", "1.1", {"gymnasium": "1.0.0"}, python="3.12"),
        record("pz", "1.27", {"gymnasium": "1.2.0"}),
        record("dmlab", "1.0", {}, outcome="install-failed"),
        record("classic", "1.0.0", {}, package="gymnasium"),
        record("classic", "1.2.0", {}, package="gymnasium"),
    ]
    plan = common.choose_common(records, ["atari", "classic", "dmlab", "nethack", "pz"], builtins=["classic"])
    chosen = {c.plugin: c for c in plan.members}
    assert chosen["atari"].pins == {"pkg": "0.11", "gymnasium": "1.1.1"} and chosen["atari"].newest
    # nethack's only passing cell on 3.11 pins gymnasium 1.0.0; atari (first) holds 1.1.1
    assert "nethack" in plan.dropped and "gymnasium==1.0.0" in plan.dropped["nethack"]
    assert "pz" in plan.dropped
    assert "no passing cell" in plan.dropped["dmlab"] and "install-failed" in plan.dropped["dmlab"]
    # the built-in goes last and takes an older version that agrees with the set
    assert "classic" in plan.dropped  # 1.2.0 and 1.0.0 both clash with gymnasium 1.1.1
    records.append(record("classic", "1.1.1", {}, package="gymnasium"))
    plan = common.choose_common(records, ["atari", "classic"], builtins=["classic"])
    assert [c.plugin for c in plan.members] == ["atari", "classic"]
    assert plan.members[1].pins == {"gymnasium": "1.1.1"} and not plan.members[1].newest


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
