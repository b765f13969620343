"""The folders build stages take from the user (BuildStage.sources): options, checks, the context, the render."""

from __future__ import annotations

import io
import pathlib
import tarfile

import pytest

from puffer_core import BuildStage, DockerLayer, StageSource
from puffer_core.errors import PluginError
from puffer_core.tank.errors import TankError
from puffer_core.tank.image.build_context import layer_context
from puffer_core.tank.image.render import Constraints, render_envs
from puffer_core.tank.image.sources import resolve_sources, source_files, source_options

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _layer(verify=None, name="thing-source"):
    source = StageSource(name=name, path="/opt/thing/src", how_to_get="git clone URL DIR", verify=verify)
    stage = BuildStage(name="thing", base="${BASE}", run=("make -C /opt/thing/src",), sources=(source,))
    return {"thing": DockerLayer(stages=(stage,))}


def test_source_options_takes_name_source_pairs_only():
    assert source_options(["--thing-source", "/a", "--other-source=/b"]) == {"thing-source": "/a", "other-source": "/b"}
    with pytest.raises(TankError, match="no such option: --thing"):
        source_options(["--thing", "/a"])
    with pytest.raises(TankError, match="--thing-source needs a folder"):
        source_options(["--thing-source"])


def test_a_missing_source_is_one_line_saying_how_to_get_it():
    with pytest.raises(TankError) as info:
        resolve_sources(_layer(), {}, environ={})
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "plugin thing's build stage thing needs --thing-source DIR (or PUFFER_THING_SOURCE): git clone URL DIR"
    )


def test_the_variable_names_the_folder_and_verify_refuses_in_one_line(tmp_path):
    assert resolve_sources(_layer(), {}, environ={"PUFFER_THING_SOURCE": str(tmp_path)}) == {
        "thing-source": tmp_path.resolve()
    }
    with pytest.raises(TankError, match=r"^--thing-source .*: wrong commit$"):
        resolve_sources(_layer(lambda folder: "wrong commit"), {"thing-source": str(tmp_path)}, environ={})
    with pytest.raises(TankError, match=r"no such folder\. git clone URL DIR"):
        resolve_sources(_layer(), {"thing-source": str(tmp_path / "absent")}, environ={})


def test_a_source_no_selected_stage_takes_is_refused(tmp_path):
    with pytest.raises(TankError, match="--other-source: no selected plugin's build stage takes that source"):
        resolve_sources(_layer(), {"other-source": str(tmp_path), "thing-source": str(tmp_path)}, environ={})


def test_declaring_a_bad_source_is_a_plugin_error():
    with pytest.raises(PluginError, match="use <what>-source"):
        _layer(name="thing")["thing"].validate("thing")
    bad = StageSource(name="thing-source", path="relative", how_to_get="x")
    with pytest.raises(PluginError, match="give an absolute path"):
        DockerLayer(stages=(BuildStage(name="thing", base="${BASE}", sources=(bad,)),)).validate("thing")


def test_the_source_is_sent_with_layer_2_and_copied_into_the_stage(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "WORKSPACE").write_text("w")
    (tmp_path / "sub" / "file.c").write_text("c")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    (tmp_path / "bazel-out").symlink_to(tmp_path / "sub")
    files = source_files("thing-source", tmp_path)
    assert sorted(files) == ["tank/sources/thing-source/WORKSPACE", "tank/sources/thing-source/sub/file.c"]
    context = layer_context(ROOT, "envs", [], "FROM x\n", sources={"thing-source": tmp_path})
    with tarfile.open(fileobj=io.BytesIO(context.getvalue())) as tar:
        names = tar.getnames()
    assert "tank/sources/thing-source/sub/file.c" in names
    assert not any(".git" in name or "bazel-out" in name for name in names)
    text = render_envs(_layer(), Constraints.none())
    assert "COPY tank/sources/thing-source /opt/thing/src\nRUN " in text
