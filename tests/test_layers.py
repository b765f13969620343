"""The shape of puffer_core and of every plugin package, read from their source (nothing
imported): no import cycle, deferred imports included; no module over 600 lines and no
function over 80.

The layers themselves are import-linter's contract in pyproject.toml (``nox -s lint``);
import-linter reports a deferred import that goes up a layer, but not a cycle within one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "puffer_core"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: What puffer_core/ may hold besides __init__.py: the contract, the public faces, one package a layer.
MAX_TOP_ENTRIES = 15


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name → file, for every module of ``package`` under ``root``."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that ``name`` imports anywhere in its file: at the top, in
    functions (deferred), under ``TYPE_CHECKING``. ``from a import b`` imports module ``a.b``
    when there is one, else ``a``; importing ``a.b`` does not count as importing ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    modules = module_files(root, package)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle ``[a, b, …, a]`` per strongly connected group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_through(group, graph) for group in groups]


def _path_through(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A cycle through the group's first module (by breadth-first search inside the group)."""
    start, members = group[0], set(group)
    previous = {start: None}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                path = [node]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if nxt not in previous:
                previous[nxt] = node
                frontier.append(nxt)
    raise AssertionError(f"no cycle through {start}")  # a strongly connected group always has one


#: Each plugin distribution of this repository: (its folder, its import package).
PLUGINS = [(path.parent, f"puffer_plugin_{path.parent.name}") for path in sorted(ROOT.glob("plugins/*/pyproject.toml"))]


def top_entries(root: Path, package: str) -> list[str]:
    """The modules and packages directly in ``package`` (``__init__.py`` and caches left out)."""
    return sorted(
        path.name
        for path in (root / package).iterdir()
        if path.name != "__init__.py" and (path.suffix == ".py" or (path.is_dir() and (path / "__init__.py").is_file()))
    )


def test_puffer_core_holds_at_most_15_entries():
    entries = top_entries(ROOT, PACKAGE)
    assert len(entries) <= MAX_TOP_ENTRIES, f"{len(entries)} in puffer_core/ (at most {MAX_TOP_ENTRIES}): {entries}"


def test_no_import_cycle_in_puffer_core():
    found = cycles(import_graph(ROOT, PACKAGE))
    assert not found, "import cycles (deferred imports count):\n" + "\n".join(" → ".join(c) for c in found)


@pytest.mark.parametrize("folder, package", PLUGINS, ids=[package for _, package in PLUGINS])
def test_no_import_cycle_in_a_plugin(folder, package):
    found = cycles(import_graph(folder, package))
    assert not found, f"import cycles in {package}:\n" + "\n".join(" → ".join(c) for c in found)


@pytest.mark.parametrize("folder, package", PLUGINS, ids=[package for _, package in PLUGINS])
def test_no_plugin_module_over_600_lines_and_no_function_over_80(folder, package):
    over = oversized(folder, package)
    assert not over, f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function: {over}"


def test_every_plugin_is_checked():
    assert len(PLUGINS) >= 4 and all((folder / package / "__init__.py").is_file() for folder, package in PLUGINS)


def oversized(root: Path, package: str) -> dict[str, int]:
    """``path`` → lines of each module over ``MAX_MODULE_LINES``, ``path:function`` → lines
    (``def`` to its end) of each function over ``MAX_FUNCTION_LINES``."""
    over = {}
    for path in module_files(root, package).values():
        text = path.read_text()
        where = path.relative_to(root).as_posix()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            over[where] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    over[f"{where}:{node.name}"] = lines
    return over


def test_no_module_over_600_lines_and_no_function_over_80():
    over = oversized(ROOT, PACKAGE)
    assert not over, f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function: {over}"


# --------------------------------------------------------------------------- the reader itself


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_through_a_deferred_import_is_found(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "def later():\n    from pkg.high import thing\n    return thing\n",
            "pkg/high.py": "from pkg import low\nthing = low\n",
            "pkg/alone.py": "import pkg.low\n",
        },
    )
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.high", "pkg.low", "pkg.high"]]


def test_relative_and_package_imports_resolve_to_modules(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub import helper\n",
            "pkg/sub/__init__.py": "from .tools import helper\n",
            "pkg/sub/tools.py": "from .. import base\nfrom ..base import VALUE\nimport json\nhelper = 1\n",
            "pkg/base.py": "VALUE = 1\n",
        },
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph == {
        "pkg": {"pkg.sub"},  # a name (helper) of the package pkg.sub
        "pkg.sub": {"pkg.sub.tools"},
        "pkg.sub.tools": {"pkg.base"},  # json is not ours
        "pkg.base": set(),
    }
    assert cycles(graph) == []


def test_entries_are_modules_and_packages(tmp_path):
    write_package(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "", "pkg/sub/__init__.py": "", "pkg/notes.txt": ""})
    (tmp_path / "pkg" / "__pycache__").mkdir()
    assert top_entries(tmp_path, "pkg") == ["a.py", "sub"]


def test_the_limits_are_600_lines_per_module_and_80_per_function(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(78))
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/at_limit.py": "x = 1\n" * 600,
            "pkg/over.py": "x = 1\n" * 601,
            "pkg/funcs.py": f"def fits():\n{body}    return 0\n\n\ndef too_long():\n{body}    x = 1\n    return 0\n",
        },
    )
    assert oversized(tmp_path, "pkg") == {"pkg/over.py": 601, "pkg/funcs.py:too_long": 81}
