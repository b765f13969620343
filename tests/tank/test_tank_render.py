"""Rendering tank/Dockerfile.envs: golden files, reproducibility, selection, constraints, the
hash-locked install, pinned base images, clashes.

The golden files in tests/golden/ are the renders of FIXTURE_LAYERS with the fixture
constraint set tests/golden/constraints-fixture.txt and its fixture hash-locked set
tests/golden/requirements-fixture.txt. After an intended change of the renderer, regenerate
them with ``PUFFER_UPDATE_GOLDEN=1 pytest tests/tank/test_tank_render.py`` and review the diff.
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest
from click.testing import CliRunner

from puffer_core import BuildStage, DockerLayer
from puffer_core.cli import tank as tank_cli
from puffer_core.errors import PluginError
from puffer_core.tank.errors import ConstraintsError, TankError
from puffer_core.tank.image import selection
from puffer_core.tank.image.hashlock import HashLockError, load_hashlock
from puffer_core.tank.image.render import (
    DEFAULT_COMMAND,
    Constraints,
    load_constraints,
    render_envs,
    select_layers,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CONSTRAINTS = GOLDEN / "constraints-fixture.txt"
REQUIREMENTS = GOLDEN / "requirements-fixture.txt"
HASHLOCK = load_hashlock(REQUIREMENTS, "tests/golden/requirements-fixture.txt")
#: A build stage's base, pinned as the renderer demands.
DEBIAN = "debian:bookworm@sha256:" + "ab" * 32

FIXTURE_LAYERS = {
    "alpha": DockerLayer(
        apt=("zlib1g-dev", "cmake", "build-essential", "cmake"),
        run=("mkdir -p /opt/alpha && echo alpha > /opt/alpha/marker", "test -s /opt/alpha/marker"),
        env={"SHARED_FLAG": "1", "ALPHA_HOME": "/opt/alpha"},
        pip=("numpy", "Alpha_Env>=1.0"),
    ),
    "beta": DockerLayer(
        apt=("libgl1", "build-essential"),
        run=("python -m pip install --no-cache-dir /opt/beta/beta_env-0.3.1-py3-none-any.whl",),
        env={"SHARED_FLAG": "1", "BETA_PATH": "/opt/beta/bin:$PATH", "BETA_GREETING": 'say "hi" \\o/'},
        pip=("numpy",),
        stages=(
            BuildStage(
                name="beta-build",
                base=DEBIAN,
                apt=("git", "ca-certificates", "curl", "git"),
                run=("mkdir -p /opt/beta", "echo wheel > /opt/beta/beta_env-0.3.1-py3-none-any.whl"),
                artifacts=("/opt/beta/beta_env-0.3.1-py3-none-any.whl",),
            ),
        ),
    ),
    "gamma": DockerLayer(apt=("libbz2-dev", "cmake"), pip=("gamma-env[extra]==2.0.0",)),
    "delta": DockerLayer(),
}

#: variant -> CLI arguments after `render` (the output path is added by the test).
FIXTURE_INPUTS = [
    "--constraints",
    "tests/golden/constraints-fixture.txt",
    "--requirements",
    "tests/golden/requirements-fixture.txt",
]
VARIANTS = {
    "all": FIXTURE_INPUTS,
    "without-beta": ["--without", "beta", *FIXTURE_INPUTS],
    "plugins-alpha-gamma": ["--plugins", "gamma,alpha", *FIXTURE_INPUTS],
    "no-constraints": ["--no-constraints"],
}


@pytest.fixture
def fixture_plugins(monkeypatch):
    """The CLI sees FIXTURE_LAYERS as the installed plugins; run from the repository root."""
    monkeypatch.setattr(selection, "plugin_layers", lambda plugin_set: (dict(FIXTURE_LAYERS), []))
    monkeypatch.chdir(ROOT)
    return FIXTURE_LAYERS


def _render_cli(args, tmp_path, name="Dockerfile.envs"):
    out = tmp_path / name
    result = CliRunner().invoke(tank_cli.tank, ["render", *args, "--output", str(out)])
    return result, out


def _golden_text(variant: str, rendered: str) -> str:
    # The header names the output path the test used; the golden names a fixed one.
    return re.sub(r"--output \S+", "--output OUT", rendered)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_render_matches_golden(fixture_plugins, tmp_path, variant):
    result, out = _render_cli(VARIANTS[variant], tmp_path)
    assert result.exit_code == 0, result.output
    text = _golden_text(variant, out.read_text())
    golden = GOLDEN / f"Dockerfile.envs.{variant}"
    if os.environ.get("PUFFER_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.is_file(), f"missing {golden}: run with PUFFER_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"render differs from {golden.name} (PUFFER_UPDATE_GOLDEN=1 to accept)"


def test_rendering_twice_is_byte_identical(fixture_plugins, tmp_path):
    first, out = _render_cli(VARIANTS["all"], tmp_path)
    before = out.read_bytes()
    second, _ = _render_cli(VARIANTS["all"], tmp_path)
    assert first.exit_code == second.exit_code == 0
    assert out.read_bytes() == before
    assert "unchanged" in second.output
    # Input order does not matter either: plugins, apt, env and pip are all sorted.
    reordered = {name: FIXTURE_LAYERS[name] for name in reversed(list(FIXTURE_LAYERS))}
    constraints = load_constraints(CONSTRAINTS, "c.txt")
    assert render_envs(reordered, constraints, hashlock=HASHLOCK) == render_envs(
        dict(FIXTURE_LAYERS), constraints, hashlock=HASHLOCK
    )


def test_the_committed_render_is_reproduced_byte_for_byte(tmp_path):
    """`puffer tank render` twice from the checkout's own plugins: the same bytes as the committed file."""
    import subprocess
    import sys

    outs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "puffer_core.cli.main", "tank", "render", "--output", "-"],
            cwd=ROOT,
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    assert outs[0] == (ROOT / "tank" / "Dockerfile.envs").read_bytes()


def test_header_says_generated_and_how_to_regenerate():
    constraints = load_constraints(CONSTRAINTS, "compat_matrix/constraints-common.txt")
    text = render_envs(FIXTURE_LAYERS, constraints, hashlock=HASHLOCK)
    head = text.splitlines()[:7]
    assert head[0].startswith("# GENERATED FILE: do not edit.")
    assert "#   alpha, beta, delta, gamma" in head
    assert "# and the common constraint set compat_matrix/constraints-common.txt, hash-locked in" in head
    assert f"# tests/golden/requirements-fixture.txt (sha256 {HASHLOCK.sha256})." in head
    assert f"# Regenerate: {DEFAULT_COMMAND}" in head
    assert not re.search(r"20\d\d-\d\d-\d\d", text), "no dates in a reproducible file"


def _from_lines(text: str) -> list[str]:
    return [line.split()[1] for line in text.splitlines() if line.startswith("FROM ")]


@pytest.mark.parametrize("path", ["tank/Dockerfile.envs", *(f"tests/golden/Dockerfile.envs.{v}" for v in VARIANTS)])
def test_every_from_names_a_digest_or_the_base_layers_id(path):
    """No floating tag: a build stage starts from NAME@sha256:DIGEST or from ${BASE} (the tank's
    own base layer, as DeepMind Lab's stage does), the layer from ${BASE}, whose ARG has no
    default (puffer tank build passes layer 1's image id)."""
    text = (ROOT / path).read_text()
    froms = _from_lines(text)
    assert froms and froms[-1] == "${BASE}"
    for image in froms[:-1]:
        assert image == "${BASE}" or re.fullmatch(r"[a-z0-9./-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}", image), image
    assert re.search(r"^ARG BASE$", text, re.MULTILINE) and "ARG BASE=" not in text


def test_a_stage_on_a_floating_tag_is_refused_naming_plugin_and_fix():
    layers = {"alpha": DockerLayer(stages=(BuildStage("build", "debian:bookworm"),))}
    refused = r"plugin 'alpha': build stage 'build' starts from 'debian:bookworm', a tag"
    with pytest.raises(PluginError, match=refused) as e:
        render_envs(layers, Constraints.none())
    assert "NAME[:TAG]@sha256:DIGEST" in str(e.value)
    # The tank's own base layer is pinned by build (its id), so a stage may start from it.
    text = render_envs({"alpha": DockerLayer(stages=(BuildStage("build", "${BASE}"),))}, Constraints.none())
    assert "FROM ${BASE} AS build" in text


def test_hash_locked_install_is_checked_against_the_files_digest():
    constraints = load_constraints(CONSTRAINTS, "fixture")
    text = render_envs(FIXTURE_LAYERS, constraints, hashlock=HASHLOCK)
    assert "COPY tests/golden/requirements-fixture.txt /opt/puffertank/requirements-envs.txt" in text
    assert f"echo '{HASHLOCK.sha256}  /opt/puffertank/requirements-envs.txt' | sha256sum --check --strict" in text
    # The backends go first, pinned and hashed; then everything, checked, without build isolation.
    backends = text.index("'setuptools==75.0.0 --hash=sha256:")
    everything = text.index("pip install --no-cache-dir --require-hashes --no-build-isolation")
    assert backends < text.index("--require-hashes --no-deps") < everything
    assert "-r /opt/puffertank/requirements-envs.txt" in text[everything:]
    # Before the plugins' steps (which may need the set), and no unpinned pip install anywhere.
    assert everything < text.index("python -m pip install --no-cache-dir /opt/beta/")
    assert "pip install --no-cache-dir -c /opt/puffertank/constraints-common.txt" not in text
    # Another set, another digest: the render names the bytes it was made from.
    other = HASHLOCK.__class__(HASHLOCK.entries, HASHLOCK.roots, "0" * 64, HASHLOCK.path)
    assert render_envs(FIXTURE_LAYERS, constraints, hashlock=other) != text


def test_a_hash_locked_set_that_misses_a_pin_is_refused(fixture_plugins, tmp_path):
    stale = tmp_path / "stale.txt"
    stale.write_text(REQUIREMENTS.read_text().replace("gamma-env==2.0.0", "gamma-env==1.9.0"))
    constraints = load_constraints(CONSTRAINTS, "fixture")
    hashlock = load_hashlock(stale, "stale.txt")
    with pytest.raises(HashLockError, match=r"stale.txt pins gamma-env==1\.9\.0, but 'gamma-env==2\.0\.0' of fixture"):
        hashlock.check_covers(constraints.lines, FIXTURE_LAYERS, constraints_source=constraints.source)
    # Through the CLI: one line naming the fix; the file must sit in the checkout (layer 2 COPYs it).
    result, _ = _render_cli([*FIXTURE_INPUTS[:2], "--requirements", str(stale)], tmp_path)
    assert result.exit_code == 1 and "give a file inside the checkout" in result.output
    missing = HASHLOCK.__class__({k: v for k, v in HASHLOCK.entries.items() if k != "beta-env"}, (), "0" * 64, "x")
    with pytest.raises(HashLockError, match=r"x does not pin it, but 'beta-env==0\.3\.1.*puffer tank compile"):
        missing.check_covers(constraints.lines, FIXTURE_LAYERS, constraints_source="fixture")


def _apt_packages(block_start: str, text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(block_start)
    index = next(i for i in range(start, len(lines)) if "apt-get install" in lines[i])
    packages = []
    for line in lines[index + 1 :]:
        if line.startswith(" && "):
            break
        packages.append(line.strip().removesuffix("\\").strip())
    return packages


def test_apt_is_deduplicated_and_sorted():
    text = render_envs(FIXTURE_LAYERS, Constraints.none())
    main = _apt_packages("# System packages of every plugin, de-duplicated and sorted.", text)
    assert main == ["build-essential", "cmake", "libbz2-dev", "libgl1", "zlib1g-dev"]
    # The build stage has its own apt install, de-duplicated too, and its packages stay there.
    stage = _apt_packages(f"FROM {DEBIAN} AS beta-build", text)
    assert stage == ["ca-certificates", "curl", "git"]
    assert text.count("apt-get install") == 2


def test_selection_plugins_and_without(fixture_plugins, tmp_path):
    result, out = _render_cli(["--plugins", "alpha,gamma", "--no-constraints"], tmp_path)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "#   alpha, gamma" in text and "beta-build" not in text and "libgl1" not in text
    assert "printf '%s\\n' alpha gamma > /opt/puffertank/plugins.txt" in text
    result, out = _render_cli(["--without", "beta,delta", "--no-constraints"], tmp_path)
    text = out.read_text()
    assert "#   alpha, gamma" in text and "AS beta-build" not in text
    assert "# Regenerate: puffer tank render --without beta,delta --no-constraints --output" in text


def test_selection_errors():
    with pytest.raises(TankError, match=r"no plugin named 'nope'.*alpha, beta, delta, gamma"):
        select_layers(FIXTURE_LAYERS, plugins="alpha,nope")
    with pytest.raises(TankError, match="no plugin named 'zeta'"):
        select_layers(FIXTURE_LAYERS, without="zeta")
    with pytest.raises(TankError, match="leaves no plugin"):
        select_layers(FIXTURE_LAYERS, plugins="alpha", without="alpha")
    assert list(select_layers(FIXTURE_LAYERS, plugins=["gamma", "alpha", "gamma"])) == ["alpha", "gamma"]


def test_constraints_are_normalized_sorted_and_deduplicated():
    constraints = load_constraints(CONSTRAINTS, "fixture")
    assert constraints.lines == (
        "Alpha_Env==1.4.0",
        'beta-env==0.3.1; python_version >= "3.10"',
        "gamma-env==2.0.0",
        "numpy==2.1.3",
    )
    text = render_envs(FIXTURE_LAYERS, constraints, hashlock=HASHLOCK)
    assert "'beta-env==0.3.1; python_version >= \"3.10\"'" in text
    assert "ARG PIP_CONSTRAINT=/opt/puffertank/constraints-common.txt" in text
    # Without a hash-locked set (the API allows it), the old constrained install, said to be unchecked.
    unhashed = render_envs(FIXTURE_LAYERS, constraints)
    assert "pip install --no-cache-dir -c /opt/puffertank/constraints-common.txt" in unhashed
    assert "(NOT hash-locked: pip checks versions, not bytes)" in unhashed


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("--index-url https://example.invalid/simple\n", "pip option"),
        ("numpy[extra]==1.0\n", "extras or URLs"),
        ("numpy\n", "constrains nothing"),
        ("numpy==1.0 garbage\n", "not a requirement"),
    ],
)
def test_bad_constraint_lines_are_refused(tmp_path, content, fragment):
    path = tmp_path / "c.txt"
    path.write_text(content)
    with pytest.raises(ConstraintsError, match=fragment):
        load_constraints(path)


def test_missing_constraints_say_what_to_do(fixture_plugins, tmp_path):
    result, _ = _render_cli(["--constraints", str(tmp_path / "absent.txt")], tmp_path)
    assert result.exit_code == 1
    for hint in ("does not exist", "nox -s compat", "--constraints PATH", "--no-constraints"):
        assert hint in result.output


def test_no_constraints_writes_an_empty_set():
    text = render_envs(FIXTURE_LAYERS, Constraints.none())
    assert "# without a constraint set: pip is NOT pinned." in text
    assert ": > /opt/puffertank/constraints-common.txt" in text


def test_check_flag(fixture_plugins, tmp_path):
    result, out = _render_cli(VARIANTS["all"], tmp_path)
    assert result.exit_code == 0
    check = CliRunner().invoke(tank_cli.tank, ["render", *VARIANTS["all"], "--output", str(out), "--check"])
    assert check.exit_code == 0, check.output
    out.write_text(out.read_text().replace("cmake", "cmake-edited"))
    check = CliRunner().invoke(tank_cli.tank, ["render", *VARIANTS["all"], "--output", str(out), "--check"])
    assert check.exit_code == 1 and "out of date" in check.output


def test_env_values_are_quoted_and_sorted():
    text = render_envs(FIXTURE_LAYERS, Constraints.none())
    block = text[text.index("ENV ") :].split("\n\n", 1)[0]
    assert block.splitlines() == [
        'ENV ALPHA_HOME="/opt/alpha" \\',
        '    BETA_GREETING="say \\"hi\\" \\\\o/" \\',
        '    BETA_PATH="/opt/beta/bin:$PATH" \\',
        '    SHARED_FLAG="1"',
    ]


def test_run_steps_keep_plugin_order_and_stage_artifacts_are_copied():
    text = render_envs(FIXTURE_LAYERS, load_constraints(CONSTRAINTS), hashlock=HASHLOCK)
    first = text.index("echo alpha > /opt/alpha/marker")
    assert first < text.index("test -s /opt/alpha/marker")
    assert (
        "COPY --from=beta-build /opt/beta/beta_env-0.3.1-py3-none-any.whl /opt/beta/beta_env-0.3.1-py3-none-any.whl"
        in text
    )
    # Every step that may download can use the build's CA bundle.
    for line in text.splitlines():
        if line.startswith("RUN ") and "mkdir -p /opt/puffertank" not in line:
            assert line.startswith("RUN . /usr/local/lib/puffertank/ca.sh"), line


@pytest.mark.parametrize(
    ("layers", "fragment"),
    [
        (
            {
                "a": DockerLayer(stages=(BuildStage("same", DEBIAN),)),
                "b": DockerLayer(stages=(BuildStage("same", DEBIAN),)),
            },
            "plugins 'a' and 'b' both declare a build stage named 'same'",
        ),
        ({"a": DockerLayer(env={"X": "1"}), "b": DockerLayer(env={"X": "2"})}, "set env var X differently"),
        (
            {
                "a": DockerLayer(stages=(BuildStage("s1", DEBIAN, artifacts=("/opt/x",)),)),
                "b": DockerLayer(stages=(BuildStage("s2", DEBIAN, artifacts=("/opt/x",)),)),
            },
            "both produce artifact '/opt/x'",
        ),
        ({"bad": DockerLayer(run=("make\nUSER root",))}, "plugin 'bad'"),
    ],
)
def test_clashes_and_bad_layers_name_the_plugins(layers, fragment):
    with pytest.raises(PluginError, match=re.escape(fragment)):
        render_envs(layers, Constraints.none())


def test_header_values_cannot_start_an_instruction():
    constraints = Constraints(("numpy==2.1.3",), "odd\nUSER root.txt")
    text = render_envs(FIXTURE_LAYERS, constraints, command="puffer tank render --output x\nUSER root")
    assert "\nUSER root" not in text
    assert "odd?USER root.txt" in text and "--output x?USER root" in text
