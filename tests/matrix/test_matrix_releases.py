"""Releases from index files: tags → Pythons, Requires-Python, yanked and pre-releases left out."""

from __future__ import annotations

import pytest

from puffer_core.matrix.releases import Release, ReleaseFile, releases_from_files, tag_python
from puffer_core.matrix.simple_index import IndexFile


@pytest.mark.parametrize(
    ("interpreter", "abi", "served"),
    [
        ("py3", "none", "any"),
        ("py2", "none", None),
        ("py311", "none", ">=3.11"),
        ("cp311", "cp311", "==3.11"),
        ("cp311", "none", "==3.11"),
        ("cp39", "abi3", ">=3.9"),
        ("cp313", "cp313t", None),  # free-threaded
        ("pp310", "pypy310_pp73", None),
        ("cp27", "cp27mu", None),
    ],
)
def test_tag_python(interpreter, abi, served):
    assert tag_python(interpreter, abi) == served


def _files(*names: str, requires: str | None = None, yanked: bool = False) -> list[IndexFile]:
    return [IndexFile(name, requires, yanked) for name in names]


def test_releases_leave_out_yanked_pre_and_dev_releases_and_other_platforms():
    files = [
        *_files("demo-1.0.tar.gz", "demo-1.0-py3-none-any.whl", requires=">=3.8"),
        *_files("demo-1.1-py3-none-any.whl", yanked=True),  # yanked: its only file
        *_files("demo-2.0rc1-py3-none-any.whl", "demo-2.1.dev3.tar.gz", "demo-2.0b1.tar.gz"),
        *_files(
            "demo-1.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "demo-1.2-cp312-cp312-win_amd64.whl",
            "demo-1.2-cp312-cp312-macosx_11_0_arm64.whl",
            "demo-1.2-cp39-abi3-musllinux_1_1_x86_64.whl",
            requires=">=3.9",
        ),
        *_files("demo-1.3-cp313-cp313-win_amd64.whl"),  # nothing for Linux
        *_files("not-a-dist.txt", "demo-bad-version!.tar.gz"),
    ]
    releases = releases_from_files(files, machine="x86_64")
    assert list(releases) == ["1.3", "1.2", "1.0"]  # newest first
    assert releases["1.0"].files == (ReleaseFile("any", ">=3.8"), ReleaseFile("source", ">=3.8"))
    assert releases["1.2"].files == (ReleaseFile("==3.11", ">=3.9"),)
    assert releases["1.3"].files == ()


def test_requires_python_of_a_release_fills_a_folder_index_file_without_it():
    files = [
        IndexFile("numpy-2.5.5.tar.gz", None),  # a plain folder index lists no Requires-Python
        IndexFile("numpy-2.5.5.tar.gz", ">=3.12"),  # the same file on the public index does
        IndexFile("numpy-2.5.5-cp312-cp312-manylinux_2_28_x86_64.whl", None),
    ]
    release = releases_from_files(files, machine="x86_64")["2.5.5"]
    assert {f.requires_python for f in release.files} == {">=3.12"}
    assert release.install_problem("numpy", "3.11") == "numpy 2.5.5 declares Requires-Python >=3.12"
    assert release.install_problem("numpy", "3.12") is None
    assert release.install_problem("numpy", "3.13") is None  # the sdist builds there


def test_install_problems_name_the_cause():
    wheels_only = Release("1.2", (ReleaseFile("==3.11", ">=3.9"), ReleaseFile(">=3.12", ">=3.9")))
    assert wheels_only.install_problem("demo", "3.11") is None
    assert wheels_only.install_problem("demo", "3.13") is None  # abi3 from 3.12 on
    assert wheels_only.install_problem("demo", "3.10", "linux x86_64") == (
        "demo 1.2 has no sdist and no wheel for CPython 3.10 (linux x86_64)"
    )
    assert wheels_only.install_problem("demo", "3.8") == "demo 1.2 declares Requires-Python >=3.9"
    capped = Release("1.0", (ReleaseFile("any", "<3.13,>=3.10"),))
    assert capped.install_problem("demo", "3.12") is None
    assert capped.install_problem("demo", "3.13") == "demo 1.0 declares Requires-Python <3.13,>=3.10"
    assert Release("9", ()).install_problem("demo", "3.11", "linux x86_64") == (
        "demo 9 has no sdist and no wheel for linux x86_64"
    )
    patch_bound = Release("3", (ReleaseFile("any", ">=3.10.1"),))
    assert patch_bound.install_problem("demo", "3.10") is None  # its later patch releases qualify


def test_release_json_round_trip():
    release = Release("1.2", (ReleaseFile("==3.11", ">=3.9"), ReleaseFile("source", None)))
    assert Release.from_json("1.2", release.to_json()) == release
