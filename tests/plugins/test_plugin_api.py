"""Plugins import only the plugin author's API (docs/writing-plugins.md, "What a plugin imports").

Every Python file of every plugin in this repository (its package, tests and benchmarks) and
of a freshly scaffolded plugin is parsed, and each import of ``puffer_core`` is checked.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import puffer_core
from puffer_core.cli.scaffold import scaffold_plugin

ROOT = Path(__file__).resolve().parents[2]

#: Modules a plugin may import from (``import X`` or ``from X import …``).
PLUGIN_API_MODULES = {
    "puffer_core",
    "puffer_core.errors",
    "puffer_core.testing",
    "puffer_core.vector",
    "puffer_core.emulation",
    "puffer_core.postprocess",
    "puffer_core.adapters",
    "puffer_core.bench.plugin_overhead",  # the harness of a plugin's benchmarks/overhead.py
}
#: Names ``from puffer_core import …`` may take: the package's own, and its public modules.
PLUGIN_API_NAMES = set(puffer_core.__all__) | {m.rpartition(".")[2] for m in PLUGIN_API_MODULES}


def core_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) for each import of puffer_core in ``path``; name None for ``import X``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names if alias.name.startswith("puffer_core")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("puffer_core"):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def violations(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        if any(part.startswith(".") or part.endswith(".egg-info") or part == "build" for part in path.parts):
            continue
        for line, module, name in core_imports(path):
            where = f"{path.relative_to(root.parent)}:{line}"
            if module not in PLUGIN_API_MODULES:
                bad.append(f"{where}: imports {module}, not part of the plugin author's API")
            elif module == "puffer_core" and name is not None and name not in PLUGIN_API_NAMES:
                bad.append(f"{where}: imports puffer_core.{name}, not part of the plugin author's API")
    return bad


def plugin_dirs() -> list[Path]:
    return sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").exists())


@pytest.mark.parametrize("plugin", plugin_dirs(), ids=lambda p: p.name)
def test_plugin_imports_only_the_plugin_api(plugin):
    assert violations(plugin) == []


def test_a_scaffolded_plugin_imports_only_the_plugin_api(tmp_path):
    assert violations(scaffold_plugin("fresh", tmp_path / "fresh")) == []


def test_the_checker_catches_an_inner_import(tmp_path):
    plugin = tmp_path / "sneaky"
    (plugin / "tests").mkdir(parents=True)
    (plugin / "tests" / "test_x.py").write_text(
        "from puffer_core.env.environments import make_raw\n"
        "from puffer_core import plugins\n"
        "def f():\n    import puffer_core.vector.mp\n"
    )
    assert [v.split(": ", 1)[1] for v in violations(plugin)] == [
        "imports puffer_core.env.environments, not part of the plugin author's API",
        "imports puffer_core.plugins, not part of the plugin author's API",
        "imports puffer_core.vector.mp, not part of the plugin author's API",
    ]


@pytest.mark.parametrize("module", sorted(PLUGIN_API_MODULES))
def test_every_declared_module_and_name_exists(module):
    imported = importlib.import_module(module)
    for name in getattr(imported, "__all__", []):
        assert hasattr(imported, name), f"{module}.__all__ names {name}, which it does not define"
