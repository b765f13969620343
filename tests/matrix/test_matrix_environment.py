"""The environment of a cell's commands: the allowlist, --pass-env, and what is never passed."""

from __future__ import annotations

import os
import pathlib
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
    "PIP_INDEX_URL": "https://me:hunter2@pypi.corp.invalid/simple",
    "UV_INDEX_URL": "https://mirror.invalid/simple",
    "UV_EXTRA_INDEX_URL": "https://me:hunter2@extra.corp.invalid/simple",
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

INDEX_SETTINGS = ("PIP_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL")


def test_the_installer_gets_the_allowlist_and_no_index_settings():
    env = cell_environment("install", environ=CALLER)
    for name in ("PATH", "TMPDIR", "LANG", "LC_ALL", "https_proxy", "NO_PROXY", "SSL_CERT_FILE"):
        assert env[name] == CALLER[name]
    assert env["PYENV_VERSION"] == CALLER["PYENV_VERSION"]  # interpreters are found through pyenv's shims
    assert env["UV_CACHE_DIR"] == "/cache/uv"
    # Index settings, whose URLs often hold credentials, only with --pass-env; HOME is the cell's own.
    for name in (*SECRETS, *INDEX_SETTINGS, "HOME", "PYTHONPATH", "VIRTUAL_ENV", "PUFFER_LOAD_PLUGINS"):
        assert name not in env
    # What the matrix sets itself; uv's configuration, cache and Pythons stay where they are.
    assert env["UV_PYTHON_DOWNLOADS"] == "never" and env["UV_NO_PROGRESS"] == "1"
    assert env["XDG_CACHE_HOME"] == "/home/me/.cache" and env["XDG_CONFIG_HOME"] == "/home/me/.config"
    assert env["XDG_DATA_HOME"] == "/home/me/.local/share"
    assert cell_environment("install", environ={**CALLER, "XDG_CACHE_HOME": "/big/cache"})["XDG_CACHE_HOME"] == (
        "/big/cache"
    )


def test_the_smoke_run_gets_no_index_settings():
    env = cell_environment("smoke", environ=CALLER)
    assert env["PATH"] == CALLER["PATH"] and env["https_proxy"] == CALLER["https_proxy"]
    for name in (*INDEX_SETTINGS, "UV_CACHE_DIR", "XDG_CACHE_HOME", "HOME", *SECRETS):
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
    for name in ("PATH", "HOME", "LC_*", "HTTPS_PROXY", "SSL_CERT_FILE", "XDG_CACHE_HOME", "PYENV_VERSION"):
        assert f" {name} " in text
    assert "--pass-env NAME" in text and "never, even with --pass-env" in text
    assert "empty temporary directory with a temporary HOME" in text
    assert "index settings (may hold credentials), only with --pass-env: PIP_* UV_INDEX UV_INDEX_URL" in text


def test_index_credentials_reach_a_cell_only_through_pass_env(monkeypatch, tmp_path):
    # An index URL with a password: an sdist's build (run by uv) or the smoke run could read it.
    monkeypatch.setenv("PIP_INDEX_URL", "https://me:hunter2@pypi.corp.invalid/simple")
    monkeypatch.setenv("UV_INDEX_URL", "https://me:hunter2@uv.corp.invalid/simple")
    cmd = ["sh", "-c", 'echo "pip=${PIP_INDEX_URL-unset} uv=${UV_INDEX_URL-unset}"']
    with open(tmp_path / "log", "w") as log:
        for stage in ("install", "smoke"):
            _, out, _ = Processes().run(cmd, log, time.monotonic() + 30, stage=stage)
            assert out.strip() == "pip=unset uv=unset"
        _, out, _ = Processes(["PIP_INDEX_URL", "UV_INDEX_*"]).run(cmd, log, time.monotonic() + 30)
    assert out.strip() == "pip=https://me:hunter2@pypi.corp.invalid/simple uv=https://me:hunter2@uv.corp.invalid/simple"


def test_each_cell_command_runs_in_an_empty_private_directory_with_a_home_of_its_own(monkeypatch, tmp_path):
    # The caller's directory holds a file named like a requirement (uv would install it) and a
    # uv.toml (uv would read it): a cell command sees neither, nor the caller's HOME.
    caller = tmp_path / "caller"
    caller.mkdir()
    (caller / "evil-1.0.tar.gz").write_bytes(b"")
    (caller / "uv.toml").write_text('index-url = "http://127.0.0.1:9/simple"\n')
    monkeypatch.chdir(caller)
    script = 'pwd; ls -A | wc -l; echo "$HOME"; ls -A "$HOME" | wc -l; stat -c "%a %u" ..; touch "$HOME/.bashrc"'
    seen = []
    with open(tmp_path / "log", "w") as log:
        for stage in ("install", "smoke", "install"):
            _, out, _ = Processes().run(["sh", "-c", script], log, time.monotonic() + 30, stage=stage)
            cwd, entries, home, home_entries, parent = out.splitlines()
            assert (entries, home_entries) == ("0", "0")  # empty, both
            assert parent == f"700 {os.getuid()}"  # private to this user
            assert pathlib.Path(cwd).parent == pathlib.Path(home).parent != caller
            assert home != os.environ.get("HOME") and not pathlib.Path(home).exists()  # removed after the command
            seen.append(cwd)
    assert len(set(seen)) == 3  # a new one per command
    assert sorted(p.name for p in caller.iterdir()) == ["evil-1.0.tar.gz", "uv.toml"]
