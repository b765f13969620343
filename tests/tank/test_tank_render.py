"""Rendering tank/Dockerfile.envs: golden files, reproducibility, selection, constraints, clashes.

The golden files in tests/golden/ are the renders of FIXTURE_LAYERS with the fixture
constraint set tests/golden/constraints-fixture.txt. After an intended change of the
renderer, regenerate them with ``PUFFER_UPDATE_GOLDEN=1 pytest tests/tank/test_tank_render.py``
and review the diff.
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest
from click.testing import CliRunner

from puffer_core import BuildStage, DockerLayer
from puffer_core.errors import PluginError
from puffer_core.tank import cli as tank_cli
from puffer_core.tank.errors import ConstraintsError, TankError
from puffer_core.tank.render import (
    DEFAULT_COMMAND,
    Constraints,
    load_constraints,
    render_envs,
    select_layers,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CONSTRAINTS = GOLDEN / "constraints-fixture.txt"

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
                base="debian:bookworm",
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
VARIANTS = {
    "all": ["--constraints", "tests/golden/constraints-fixture.txt"],
    "without-beta": ["--without", "beta", "--constraints", "tests/golden/constraints-fixture.txt"],
    "plugins-alpha-gamma": ["--plugins", "gamma,alpha", "--constraints", "tests/golden/constraints-fixture.txt"],
    "no-constraints": ["--no-constraints"],
}


@pytest.fixture
def fixture_plugins(monkeypatch):
    """The CLI sees FIXTURE_LAYERS as the installed plugins; run from the repository root."""
    monkeypatch.setattr(tank_cli, "plugin_layers", lambda plugin_set: (dict(FIXTURE_LAYERS), []))
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
    assert render_envs(reordered, constraints) == render_envs(dict(FIXTURE_LAYERS), constraints)


def test_header_says_generated_and_how_to_regenerate():
    text = render_envs(FIXTURE_LAYERS, load_constraints(CONSTRAINTS, "compat_matrix/constraints-common.txt"))
    head = text.splitlines()[:6]
    assert head[0].startswith("# GENERATED FILE: do not edit.")
    assert "#   alpha, beta, delta, gamma" in head
    assert "# and the common constraint set compat_matrix/constraints-common.txt." in head
    assert f"# Regenerate: {DEFAULT_COMMAND}" in head
    assert "ARG BASE=puffertank:base" in text
    assert not re.search(r"20\d\d-\d\d-\d\d", text), "no dates in a reproducible file"


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
    stage = _apt_packages("FROM debian:bookworm AS beta-build", text)
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
    text = render_envs(FIXTURE_LAYERS, constraints)
    assert "'beta-env==0.3.1; python_version >= \"3.10\"'" in text
    assert "ARG PIP_CONSTRAINT=/opt/puffertank/constraints-common.txt" in text
    assert "pip install --no-cache-dir -c /opt/puffertank/constraints-common.txt" in text


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
    text = render_envs(FIXTURE_LAYERS, Constraints.none())
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
                "a": DockerLayer(stages=(BuildStage("same", "debian:12"),)),
                "b": DockerLayer(stages=(BuildStage("same", "debian:12"),)),
            },
            "plugins 'a' and 'b' both declare a build stage named 'same'",
        ),
        ({"a": DockerLayer(env={"X": "1"}), "b": DockerLayer(env={"X": "2"})}, "set env var X differently"),
        (
            {
                "a": DockerLayer(stages=(BuildStage("s1", "debian:12", artifacts=("/opt/x",)),)),
                "b": DockerLayer(stages=(BuildStage("s2", "debian:12", artifacts=("/opt/x",)),)),
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
