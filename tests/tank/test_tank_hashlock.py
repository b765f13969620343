"""The hash-locked set, tank/requirements-envs.txt: read, checked against the checkout, compiled by uv.

The compile tests resolve real (small) packages against the package index, as
`puffer tank compile` does; everything else is offline.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from puffer_core import DockerLayer
from puffer_core.tank.image.hashlock import (
    DEFAULT_HASHLOCK,
    HashLockError,
    compile_hashlock,
    compile_roots,
    load_hashlock,
    parse_hashlock,
)
from puffer_core.tank.image.lock import local_projects
from puffer_core.tank.image.render import load_constraints

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "golden" / "requirements-fixture.txt"
#: mdurl 0.1.2's wheel, as the index publishes it.
MDURL_WHEEL = "sha256:84008a41e51615a49fc9966191ff91509e3c40b939176e643fd50a5c2196b8f8"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "tank", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PUFFER_DEBUG": ""},
    )


def test_parse_reads_pins_hashes_annotations_and_roots():
    lock = load_hashlock(FIXTURE)
    assert sorted(lock.entries) == ["alpha-env", "beta-env", "gamma-env", "gamma-extra-dep", "numpy", "setuptools"]
    numpy = lock.entries["numpy"]
    assert numpy.version == "2.1.3" and len(numpy.hashes) == 2
    assert all(digest.startswith("sha256:") and len(digest) == 71 for digest in numpy.hashes)
    assert numpy.via == ("-r roots.in", "alpha-env")
    assert lock.entries["setuptools"].via == ("gamma-extra-dep",)
    assert lock.roots == ("alpha-env==1.4.0", "beta-env==0.3.1", "gamma-env[extra]==2.0.0", "numpy==2.1.3")
    assert [entry.name for entry in lock.backends()] == ["setuptools"]
    line = lock.entries["setuptools"].requirement_line()
    assert line.startswith("setuptools==75.0.0 --hash=sha256:") and line.count("--hash=") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("numpy>=2 \\\n    --hash=sha256:" + "a" * 64 + "\n", "line 1: 'numpy>=2' is not pinned as NAME==VERSION"),
        ("numpy==2.1.3\n", "line 1: numpy==2.1.3 has no --hash=sha256:<64 hex digits>"),
        ("numpy==2.1.3 --hash=md5:abc\n", "got 'md5:abc'"),
        (
            "# only\n\n--index-url https://example.invalid/simple\n",
            "line 3: '--index-url https://example.invalid/simple",
        ),
        ("# nothing\n", "pins no package"),
    ],
)
def test_a_malformed_set_names_the_line_and_the_fix(text, message):
    with pytest.raises(HashLockError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_hashlock(text, "FILE")


def test_a_missing_set_says_how_to_make_one(tmp_path):
    with pytest.raises(HashLockError, match=r"does not exist\. Compile it with nox -s tank -- --compile"):
        load_hashlock(tmp_path / "absent.txt")


def test_a_plugin_pip_need_the_set_lacks_names_the_plugin():
    lock = load_hashlock(FIXTURE, "fixture.txt")
    lock.check_covers([], {"alpha": DockerLayer(pip=("numpy>=2",))})
    with pytest.raises(HashLockError, match=r"fixture.txt pins numpy==2\.1\.3, but plugin 'zeta' needs 'numpy>=3'"):
        lock.check_covers([], {"zeta": DockerLayer(pip=("numpy>=3",))})
    with pytest.raises(HashLockError, match=r"does not pin it, but plugin 'zeta' needs 'scipy'"):
        lock.check_covers([], {"zeta": DockerLayer(pip=("scipy",))})
    # A requirement whose marker does not hold on the tank's target is not needed there.
    lock.check_covers(['scipy; sys_platform == "win32"'], {})


def test_roots_are_the_common_pins_and_the_checkouts_needs_without_its_own_projects():
    constraints = load_constraints(ROOT / "compat_matrix" / "constraints-common.txt")
    roots, local = compile_roots(ROOT, constraints.lines, {"x": DockerLayer(pip=('tomli; python_version < "3.11"',))})
    assert {"puffer-core", "puffer-plugin-atari", "puffer-plugin-nethack"} <= local == local_projects(ROOT)
    assert "numpy==2.4.6" in roots and "pluggy>=1.3" in roots and "setuptools>=77" in roots
    assert any(root.startswith("pettingzoo[butterfly,classic]") for root in roots)
    assert not [root for root in roots if root.startswith("puffer")], "the checkout's projects are installed from it"
    assert not [root for root in roots if root.startswith("tomli")], "a marker false on Python 3.11 drops the root"
    assert "ray>=2.9" in roots, "the extras [tool.puffertank] names join the set: boxes join a cluster from the tank"
    assert roots == sorted(set(roots), key=lambda line: (line.split("=")[0].split(">")[0].split("<")[0], line))


def test_an_extra_the_tank_names_must_exist(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = []\n[project.optional-dependencies]\nray = ["ray"]\n'
        '[tool.puffertank]\nextras = ["rya"]\n'
    )
    with pytest.raises(HashLockError, match=r"extras names 'rya', which is not an extra there"):
        compile_roots(tmp_path, [], {})


def test_layer_3_asks_for_the_tanks_extras_too(tmp_path):
    """tank/puffertank-deps.py (standard library only, inside the image) reads the same table."""
    # The script runs on the image's Python (3.11: tomllib); a session on 3.10 borrows a 3.11.
    python = sys.executable if sys.version_info >= (3, 11) else shutil.which("python3.11")
    if python is None:
        pytest.skip("tank/puffertank-deps.py needs Python >= 3.11 (tomllib), as in the image; none found here")
    proc = subprocess.run(
        [python, str(ROOT / "tank" / "puffertank-deps.py"), "--root", str(ROOT), "nethack"],
        capture_output=True,
        text=True,
        check=True,
    )
    needs = proc.stdout.splitlines()
    assert "ray>=2.9" in needs and "nle>=0.9.1" in needs and not [n for n in needs if n.startswith("puffer")]


def test_the_committed_set_answers_the_checkout():
    """`puffer tank compile --check` (offline): the committed roots are the checkout's; the set pins the common one."""
    proc = _cli("compile", "--check")
    assert proc.returncode == 0, proc.stderr
    assert f"{DEFAULT_HASHLOCK} is up to date" in proc.stderr
    lock = load_hashlock(ROOT / DEFAULT_HASHLOCK)
    assert {"nle", "ale-py", "gymnasium", "numpy", "pluggy", "click", "rich", "setuptools", "ray"} <= set(lock.entries)
    assert not [name for name in lock.entries if name.startswith("puffer")]
    text = (ROOT / DEFAULT_HASHLOCK).read_text()
    assert text.startswith("# GENERATED FILE: do not edit.") and "Regenerate: nox -s tank -- --compile" in text


def test_check_flags_a_set_whose_roots_moved(tmp_path):
    stale = tmp_path / "requirements-envs.txt"
    stale.write_text((ROOT / DEFAULT_HASHLOCK).read_text().replace("#   pluggy>=1.3\n", ""))
    proc = _cli("compile", "--check", "--output", str(stale))
    assert proc.returncode == 1
    assert "is out of date (new roots: pluggy>=1.3)" in proc.stderr
    assert "recompile with nox -s tank -- --compile" in proc.stderr


def test_compile_resolves_with_hashes_keeps_pins_and_upgrades_on_request():
    text = compile_hashlock(["mdurl"], "", "fixture-constraints.txt")
    lock = parse_hashlock(text)
    assert lock.roots == ("mdurl",)
    newest = lock.entries["mdurl"].version
    assert text.startswith("# GENERATED FILE: do not edit.") and "(sha256 e3b0c44298fc1c14...)" in text
    # An older pin in the current file stays (uv prefers it) unless --upgrade.
    previous = "mdurl==0.1.2 \\\n    --hash=" + MDURL_WHEEL + "\n"
    kept = parse_hashlock(compile_hashlock(["mdurl"], "", "c.txt", previous=previous))
    assert kept.entries["mdurl"].version == "0.1.2" and MDURL_WHEEL in kept.entries["mdurl"].hashes
    upgraded = parse_hashlock(compile_hashlock(["mdurl"], "", "c.txt", previous=previous, upgrade=True))
    assert upgraded.entries["mdurl"].version == newest
    # Constraints bind: the set follows them.
    pinned = parse_hashlock(compile_hashlock(["mdurl"], "mdurl==0.1.2\n", "c.txt"))
    assert pinned.entries["mdurl"].version == "0.1.2"


def test_compile_that_cannot_resolve_says_why():
    with pytest.raises(HashLockError, match="uv pip compile could not resolve the tank's roots"):
        compile_hashlock(["mdurl==0.1.2"], "mdurl==0.1.1\n", "c.txt")
