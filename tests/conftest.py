from __future__ import annotations

import sys

import pytest

from puffer_core import plugins as plugin_module


@pytest.fixture
def site(tmp_path, monkeypatch):
    """An empty folder of installed distributions, importable in this process."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("puffer_plugin_"):
            del sys.modules[name]


@pytest.fixture(autouse=True)
def fresh_plugin_cache():
    """Each test sees plugins loaded anew (env variables may differ between tests)."""
    plugin_module.reset_plugins()
    yield
    plugin_module.reset_plugins()
