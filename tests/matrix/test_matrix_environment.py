"""The environment of a cell's commands: the allowlist, --pass-env, and what is never passed."""

from __future__ import annotations

import os
import time

import pytest
from click.testing import CliRunner

from puffer_core.cli.matrix import matrix
from puffer_core.matrix.environment import NEVER_PASSED, cell_environment, check_pass_env, unmatched_pass_env
from puffer_core.matrix.processes import Processes
from puffer_core.matrix.store import MatrixError

CALLER = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "TMPDIR": "/var/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "https_proxy": "http://proxy:3128",
    "NO_PROXY": "localhost",
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    "PYENV_VERSION": "3.11.7:3.12.1",
    "PIP_FIND_LINKS": "/opt/wheels",
    "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
    "UV_INDEX_URL": "https://mirror.invalid/simple",
    "UV_CACHE_DIR": "/cache/uv",
    "PUFFER_TEST_SECRET": "hunter2",
    "AWS_SECRET_ACCESS_KEY": "xyz",
    "GITHUB_TOKEN": "ghp_x",
    "UV_PUBLISH_TOKEN": "pypi-x",
    "UV_INDEX_PRIVATE_PASSWORD": "pw",
    "PYTHONPATH": "/src",
    "VIRTUAL_ENV": "/venv",
    "PUFFER_LOAD_PLUGINS": "other",
}

SECRETS = (
    "PUFFER_TEST_SECRET",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "UV_PUBLISH_TOKEN",
    "UV_INDEX_PRIVATE_PASSWORD",
)


def test_the_installer_gets_the_allowlist_and_the_index_settings_only():
    env = cell_environment("install", environ=CALLER)
    for name in ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "https_proxy", "NO_PROXY", "SSL_CERT_FILE"):
        assert env[name] == CALLER[name]
    assert env["PYENV_VERSION"] == CALLER["PYENV_VERSION"]  # interpreters are found through pyenv's shims
    assert env["PIP_FIND_LINKS"] == "/opt/wheels" and env["UV_INDEX_URL"] == CALLER["UV_INDEX_URL"]
    assert env["UV_CACHE_DIR"] == "/cache/uv"
    for name in (*SECRETS, "PYTHONPATH", "VIRTUAL_ENV", "PUFFER_LOAD_PLUGINS"):
        assert name not in env
    # What the matrix sets itself.
    assert env["UV_PYTHON_DOWNLOADS"] == "never" and env["UV_NO_PROGRESS"] == "1"


def test_the_smoke_run_gets_no_index_settings():
    env = cell_environment("smoke", environ=CALLER)
    assert env["PATH"] == CALLER["PATH"] and env["https_proxy"] == CALLER["https_proxy"]
    for name in ("PIP_FIND_LINKS", "PIP_CERT", "UV_INDEX_URL", "UV_CACHE_DIR", *SECRETS):
        assert name not in env


def test_pass_env_names_and_globs_reach_every_stage():
    for stage in ("install", "smoke"):
        env = cell_environment(stage, ["PUFFER_TEST_SECRET", "UV_INDEX_*"], environ=CALLER)
        assert env["PUFFER_TEST_SECRET"] == "hunter2"
        assert env["UV_INDEX_PRIVATE_PASSWORD"] == "pw" and env["UV_INDEX_URL"] == CALLER["UV_INDEX_URL"]
        assert "GITHUB_TOKEN" not in env and "UV_PUBLISH_TOKEN" not in env
    # A glob never lets through what a cell must not have.
    assert "PYTHONPATH" not in cell_environment("smoke", ["PYTHON*", "*"], environ=CALLER)
    assert unmatched_pass_env(["PUFFER_TEST_SECRET", "PUFER_TYPO"], CALLER) == ["PUFER_TYPO"]


@pytest.mark.parametrize("value", ["PYTHONPATH", "VIRTUAL_ENV", "PUFFER_DISABLE_PLUGINS", "A=B", "$HOME", "", "A B"])
def test_check_pass_env_refuses_what_cannot_or_must_not_be_passed(value):
    with pytest.raises(MatrixError, match="--pass-env"):
        check_pass_env([value])


def test_never_passed_holds_what_breaks_a_cells_isolation():
    assert {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PUFFER_LOAD_PLUGINS", "PUFFER_DISABLE_PLUGINS"} <= NEVER_PASSED


def test_cell_commands_run_with_the_allowlisted_environment(monkeypatch, tmp_path):
    # The runner's Processes start every cell command (uv's and the smoke run): a real child here.
    monkeypatch.setenv("PUFFER_TEST_SECRET", "hunter2")
    cmd = ["sh", "-c", 'echo "secret=${PUFFER_TEST_SECRET-unset} path=${PATH:+set}"']
    for stage in ("install", "smoke"):
        with open(tmp_path / "log", "w") as log:
            _, out, _ = Processes().run(cmd, log, time.monotonic() + 30, stage=stage, capture_stdout=True)
            assert out.strip() == "secret=unset path=set"
            _, out, _ = Processes(["PUFFER_TEST_*"]).run(cmd, log, time.monotonic() + 30, stage=stage)
            assert out.strip() == "secret=hunter2 path=set"
    assert os.environ["PUFFER_TEST_SECRET"] == "hunter2"  # the caller's own environment is untouched


def test_matrix_run_refuses_a_pass_env_it_would_never_pass_and_warns_of_one_matching_nothing(tmp_path):
    args = ["run", "--dry-run", "--plugin", "classic", "--quick", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(matrix, [*args, "--pass-env", "PYTHONPATH"])
    assert result.exit_code != 0
    assert "--pass-env PYTHONPATH: the matrix never passes it" in " ".join(result.output.split())
    result = CliRunner().invoke(matrix, [*args, "--pass-env", "PUFFER_NO_SUCH_VARIABLE_*"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "warning: --pass-env PUFFER_NO_SUCH_VARIABLE_* matches no variable" in result.output
    assert not (tmp_path / "out" / "results.json").exists()


def test_matrix_run_help_lists_the_allowlist():
    result = CliRunner().invoke(matrix, ["run", "--help"], terminal_width=100)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in ("PATH", "HOME", "LC_*", "HTTPS_PROXY", "SSL_CERT_FILE", "PIP_*", "UV_INDEX_URL", "PYENV_VERSION"):
        assert f" {name} " in text
    assert "--pass-env NAME" in text and "never, even with --pass-env" in text
