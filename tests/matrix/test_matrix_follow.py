"""What plugins follow and the cells discovered releases add: ids, order, bounds, exclusions."""

from __future__ import annotations

import pytest

from puffer_core import CompatAxes, KnownBad
from puffer_core.errors import PluginError
from puffer_core.matrix.follow import Follow, discovered_cells, followed, plugin_cells
from puffer_core.matrix.model import cells_for
from puffer_core.matrix.releases import Release, ReleaseFile

ANY = (ReleaseFile("any", ">=3.10"),)

NETHACK = CompatAxes(
    package="nle",
    versions=("1.2.0", "1.3.0"),
    python=("3.10", "3.11", "3.12", "3.13"),
    pins={"1.2.0": {"gymnasium": "1.0.0"}, "1.3.0": {"gymnasium": "1.2.0", "setuptools": "80.0.0"}},
    known_bad=(KnownBad({"nle": ">=1.1,<1.3", "python": ">=3.13"}, "nle 1.2 has no 3.13 wheel"),),
)

DISCOVERED = {
    "gymnasium": {
        "1.4.0": Release("1.4.0", ANY),
        "1.3.0": Release("1.3.0", ANY),
        "1.2.3": Release("1.2.3", ANY),
        "1.2.2": Release("1.2.2", ANY),  # superseded by 1.2.3
        "1.1.9": Release("1.1.9", ANY),  # older than what the plugins declare
    },
    "numpy": {"2.5.5": Release("2.5.5", (ReleaseFile("==3.12", ">=3.12"), ReleaseFile("source", ">=3.12")))},
    "nle": {"1.4.0": Release("1.4.0", (ReleaseFile("==3.11", ">=3.10"), ReleaseFile("==3.12", ">=3.10")))},
}


def test_followed_roles_newest_and_bounds():
    axes = CompatAxes(
        package="pettingzoo",
        versions=("1.24.0", "1.25.0"),
        axes={"gymnasium": ("1.0.0", "1.2.0")},
        pins={"1.24.0": {"numpy": "1.26.4"}, "1.25.0": {"SciPy": "1.14.0"}},
        follow={"numpy": ">=2.5", "Gymnasium": "<1.4"},
    )
    found = followed(axes)
    assert found == {
        "pettingzoo": Follow("pettingzoo", "env", "1.25.0", ""),
        "gymnasium": Follow("gymnasium", "axis", "1.2.0", "<1.4"),  # its follow entry bounds it
        "scipy": Follow("SciPy", "companion", "1.14.0", ""),  # pinned by the newest version
        "numpy": Follow("numpy", "follow", "1.26.4", ">=2.5"),  # an older version's pin is declared too
    }
    assert found["gymnasium"].new_versions(["1.4.0", "1.3.1", "1.3.0", "1.2.0", "1.2.5"]) == ["1.3.1", "1.2.5"]
    assert found["numpy"].new_versions(["2.4.6", "2.5.0", "2.5.5"]) == ["2.5.5"]


def test_declared_cells_stay_and_new_ones_come_first_newest_first():
    cells = plugin_cells("nethack", NETHACK, DISCOVERED)
    declared = cells_for("nethack", NETHACK)
    assert cells[-len(declared) :] == declared  # the same cells, ids and order as without discovery
    new = cells[: -len(declared)]
    assert len({c.id for c in cells}) == len(cells)  # ids are unique
    ids = [c.id for c in new]
    assert ids[:4] == [f"nethack-nle1.4.0-py{py}" for py in ("3.10", "3.11", "3.12", "3.13")]
    assert ids[4:] == [
        f"nethack-nle1.3.0-gymnasium{g}-py{py}" for g in ("1.4.0", "1.3.0", "1.2.3") for py in NETHACK.python
    ]
    row = next(c for c in new if c.id == "nethack-nle1.3.0-gymnasium1.4.0-py3.11")
    assert row.pins == {"nle": "1.3.0", "setuptools": "80.0.0", "gymnasium": "1.4.0"}  # the companion replaced
    assert row.requirements() == ["nle==1.3.0", "setuptools==80.0.0", "gymnasium==1.4.0"]
    assert row.excluded is None
    env_row = next(c for c in new if c.id == "nethack-nle1.4.0-py3.11")
    assert env_row.companions == () and env_row.pins == {"nle": "1.4.0"}  # the resolver picks
    assert plugin_cells("nethack", NETHACK, {}) == declared


def test_a_release_that_cannot_install_is_excluded_with_its_reason():
    by_id = {c.id: c for c in discovered_cells("nethack", NETHACK, DISCOVERED)}
    reason = by_id["nethack-nle1.4.0-py3.10"].excluded
    assert reason.startswith("nle 1.4.0 has no sdist and no wheel for CPython 3.10 (linux ")
    assert by_id["nethack-nle1.4.0-py3.11"].excluded is None
    classic = CompatAxes(package="gymnasium", versions=("1.2.0",), python=("3.11", "3.12"), follow={"numpy": ">=2.5"})
    cells = {c.id: c for c in discovered_cells("classic", classic, DISCOVERED)}
    assert cells["classic-gymnasium1.2.0-numpy2.5.5-py3.11"].excluded == "numpy 2.5.5 declares Requires-Python >=3.12"
    assert cells["classic-gymnasium1.2.0-numpy2.5.5-py3.12"].excluded is None
    assert cells["classic-gymnasium1.4.0-py3.11"].pins == {"gymnasium": "1.4.0"}


def test_known_bad_excludes_first_with_its_own_reason():
    axes = CompatAxes(
        package="nle",
        versions=("1.3.0",),
        python=("3.10", "3.11"),
        known_bad=(KnownBad({"nle": ">=1.4", "python": "==3.10"}, "nle 1.4 drops 3.10 on purpose"),),
    )
    cells = {c.id: c for c in discovered_cells("nethack", axes, DISCOVERED)}
    assert cells["nethack-nle1.4.0-py3.10"].excluded == "nle 1.4 drops 3.10 on purpose"


def test_a_new_axis_value_meets_every_version_but_not_where_a_companion_pin_fixes_it():
    axes = CompatAxes(
        package="pettingzoo",
        versions=("1.24.0", "1.25.0"),
        python=("3.11",),
        axes={"gymnasium": ("1.0.0", "1.2.0")},
        pins={"1.24.0": {"gymnasium": "1.0.0"}},
    )
    ids = [c.id for c in discovered_cells("pettingzoo", axes, {"gymnasium": {"1.3.0": Release("1.3.0", ANY)}})]
    assert ids == ["pettingzoo-pettingzoo1.25.0-gymnasium1.3.0-py3.11"]
    # a follow bound keeps a release out
    bounded = CompatAxes(**{**axes.__dict__, "follow": {"gymnasium": "<1.3"}})
    assert discovered_cells("pettingzoo", bounded, {"gymnasium": {"1.3.0": Release("1.3.0", ANY)}}) == []


@pytest.mark.parametrize(
    ("follow", "problem"),
    [
        ({"numpy": ">=2.x"}, "not a version specifier"),
        ({"--index-url=x": ""}, "is not a package name"),
        ({"numpy": ">=2\n"}, "not a version specifier"),
        ({"numpy": 2}, "not a version specifier"),
        (["numpy"], "must map a package"),
    ],
)
def test_follow_is_validated(follow, problem):
    axes = CompatAxes(package="nle", versions=("1.3.0",), follow=follow)
    with pytest.raises(PluginError, match=problem) as failed:
        axes.validate("nethack")
    assert "field 'follow'" in str(failed.value)
    CompatAxes(package="nle", versions=("1.3.0",), follow={"numpy": ">=2.5", "scipy": ""}).validate("nethack")
