"""Which indexes discovery asks: --index, else what pip and uv would use; credentials never shown."""

from __future__ import annotations

import pytest

from puffer_core.matrix.index_config import default_index, index_urls, pip_config_files, shown_url
from puffer_core.matrix.store import MatrixError


def _environ(tmp_path, **values: str) -> dict[str, str]:
    """An environment whose pip configuration is only what the test writes (a home of its own)."""
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_DIRS": str(tmp_path / "xdg"), **values}


def _pip_conf(tmp_path, text: str) -> None:
    conf = tmp_path / "home" / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(text)


def test_pips_default_when_nothing_is_configured(tmp_path, monkeypatch):
    env = _environ(tmp_path, PIP_CONFIG_FILE="/dev/null")
    monkeypatch.setattr("puffer_core.matrix.index_config.default_index", lambda: "https://index.invalid/simple")
    assert index_urls(environ=env) == ["https://index.invalid/simple"]


def test_without_pip_to_name_the_default_the_error_says_what_to_pass(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pip._internal.models.index", None)  # import fails
    with pytest.raises(MatrixError, match="pass --index URL, set UV_DEFAULT_INDEX or PIP_INDEX_URL"):
        default_index()


def test_explicit_index_wins_over_everything(tmp_path):
    env = _environ(tmp_path, PIP_INDEX_URL="https://mirror.invalid/simple", UV_INDEX="a=https://b.invalid/s")
    assert index_urls("http://127.0.0.1:1/simple/", env) == ["http://127.0.0.1:1/simple"]


def test_environment_order_and_extra_indexes(tmp_path):
    _pip_conf(
        tmp_path, "[global]\nindex-url = https://conf.invalid/simple\nextra-index-url = file:///opt/a file:///opt/b\n"
    )
    env = _environ(tmp_path)
    assert index_urls(environ=env) == ["https://conf.invalid/simple", "file:///opt/a", "file:///opt/b"]
    env["PIP_INDEX_URL"] = "https://pip.invalid/simple"
    assert index_urls(environ=env)[0] == "https://pip.invalid/simple"
    env["UV_INDEX_URL"] = "https://uv-old.invalid/simple"
    assert index_urls(environ=env)[0] == "https://uv-old.invalid/simple"
    env["UV_DEFAULT_INDEX"] = "https://uv.invalid/simple"
    env["UV_INDEX"] = "mine=https://named.invalid/simple https://plain.invalid/simple"
    env["PIP_EXTRA_INDEX_URL"] = "file:///opt/a"  # listed once
    assert index_urls(environ=env) == [
        "https://uv.invalid/simple",
        "https://named.invalid/simple",
        "https://plain.invalid/simple",
        "file:///opt/a",
        "file:///opt/b",
    ]


def test_pip_config_file_order_later_wins(tmp_path):
    _pip_conf(tmp_path, "[global]\nindex-url = https://user.invalid/simple\n")
    site = tmp_path / "site.conf"
    site.write_text("[install]\nindex-url = https://site.invalid/simple\n")
    env = _environ(tmp_path, PIP_CONFIG_FILE=str(site))
    assert pip_config_files(env)[-1] == site
    assert index_urls(environ=env) == ["https://site.invalid/simple"]
    broken = tmp_path / "broken.conf"
    broken.write_text("no section header\n")
    env["PIP_CONFIG_FILE"] = str(broken)  # pip reports it itself; discovery reads the others
    assert index_urls(environ=env) == ["https://user.invalid/simple"]


def test_shown_url_drops_credentials():
    assert shown_url("https://user:pa%40ss@host.invalid:8443/simple") == "https://host.invalid:8443/simple"
    assert shown_url("https://token@host.invalid/simple") == "https://host.invalid/simple"
    assert shown_url("http://u:p@[::1]:9/simple") == "http://[::1]:9/simple"
    assert shown_url("file:///opt/pypi/simple") == "file:///opt/pypi/simple"
