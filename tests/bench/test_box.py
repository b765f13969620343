"""puffer_core.bench.box's table without a box: the steps, the total against the aim, the resume line."""

from __future__ import annotations

from puffer_core.bench.box import STEPS, render_markdown


def test_the_table_names_each_step_and_the_resume_after_a_crash():
    document = {"steps": dict.fromkeys(STEPS, 1.0), "total": 3.0}
    text = render_markdown(document)
    assert all(f"| {step} | 1.0 |" in text for step in STEPS) and "**3.0**" in text
    assert "stepping again" not in text  # a run without the resume row says nothing of it
    text = render_markdown({**document, "resume": {"engine_back": 0.6, "stepping_again": 9.5}})
    assert "came back (0.6 s)" in text and "stepping again 9.5 s later, resumed by itself" in text


def test_the_fleet_line_sets_three_boxes_beside_one():
    document = {"steps": dict.fromkeys(STEPS, 10.0), "total": 30.0,
                "fleet": {"boxes": 3, "users": 3, "playbook": 100.0, "to_every_login": 112.0}}  # fmt: skip
    text = render_markdown(document)
    assert "An inventory of 3 bare boxes and 3 users" in text and "after 112 s (the playbook 100 s)" in text
    assert "against one box's setup and first login of 20 s above" in text
