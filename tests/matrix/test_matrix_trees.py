"""Source trees and their hashes: the core's follows what a cell runs, a plugin's ignores tests."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

from puffer_core.matrix.trees import core_tree_hash, hashed_core_files, plugin_tree_hash

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "matrix_fixture_plugin"


def _fake_core(tmp_path: pathlib.Path) -> pathlib.Path:
    """A core whose smoke run imports the CLI's rollout helper (deferred) and nothing else of the host-only parts."""
    root = tmp_path / "core"
    files = {
        "__init__.py": "x = 1\n",
        "testing/__init__.py": "from puffer_core.testing import envs\n",
        "testing/envs.py": "envs = 1\n",
        "testing/smoke.py": "def run():\n    from puffer_core.cli.rollout import random_actions\n",
        "testing/extra.py": "extra = 1\n",
        "cli/__init__.py": "",
        "cli/rollout.py": "def random_actions():\n    pass\n",
        "matrix/views.py": "views = 1\n",
    }
    for name, text in files.items():
        (root / "puffer_core" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "puffer_core" / name).write_text(text)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "puffer-core"\nversion = "0.1.0"\ndependencies = ["numpy"]\n'
        "[project.optional-dependencies]\ncommon = []\n[tool.ruff]\nline-length = 120\n"
    )
    return root


def _edit(root: pathlib.Path, name: str, text: str) -> None:
    path = root / "puffer_core" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_core_hash_follows_what_runs_in_a_cell(tmp_path):
    root = _fake_core(tmp_path)
    base = core_tree_hash(root)
    _edit(root, "matrix/views.py", "views = 2\n")  # host-only: same hash
    _edit(root, "cli/main.py", "cli = 1\n")  # the CLI never runs in a cell
    _edit(root, "tank/render.py", "tank = 1\n")
    _edit(root, "testing/extra.py", "extra = 2\n")  # in the testing kit, but the smoke run never imports it
    _edit(root, "__pycache__/x.pyc", "junk")
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace("common = []", 'common = ["a"]').replace("120", "100"))
    assert core_tree_hash(root) == base
    _edit(root, "vector/mp.py", "mp = 1\n")  # a new module that cells run
    assert core_tree_hash(root) != base
    (root / "puffer_core" / "vector" / "mp.py").unlink()
    assert core_tree_hash(root) == base
    for name in ("testing/smoke.py", "testing/envs.py", "cli/rollout.py", "cli/__init__.py"):  # the smoke run's reach
        before = core_tree_hash(root)
        _edit(root, name, (root / "puffer_core" / name).read_text() + "# changed\n")
        assert core_tree_hash(root) != before, name
    second = core_tree_hash(root)
    (root / "pyproject.toml").write_text(text.replace('["numpy"]', '["numpy>=2"]'))  # a dependency
    assert core_tree_hash(root) != second


def test_the_reach_of_the_smoke_run_follows_every_kind_of_import(tmp_path):
    root = _fake_core(tmp_path)
    _edit(root, "testing/smoke.py", "from . import helper\nimport puffer_core.bench.timing as timing\n")
    _edit(root, "testing/helper.py", "from ..train import config\n")
    _edit(root, "bench/__init__.py", "")
    _edit(root, "bench/timing.py", "")
    _edit(root, "train/__init__.py", "")
    _edit(root, "train/config.py", "")
    _edit(root, "train/other.py", "")
    hashed = {path.as_posix() for path in hashed_core_files(root)}
    reached = {"testing/helper.py", "bench/__init__.py", "bench/timing.py", "train/__init__.py", "train/config.py"}
    assert {f"puffer_core/{name}" for name in reached} <= hashed
    assert "puffer_core/train/other.py" not in hashed and "puffer_core/cli/rollout.py" not in hashed


def test_plugin_hash_ignores_tests_and_caches(tmp_path):
    plugin = tmp_path / "fixture"
    shutil.copytree(FIXTURE, plugin)
    base = plugin_tree_hash(plugin)
    (plugin / "tests").mkdir()
    (plugin / "tests" / "test_x.py").write_text("assert True\n")
    (plugin / "build").mkdir()
    (plugin / "build" / "junk").write_text("x")
    assert plugin_tree_hash(plugin) == base
    init = plugin / "puffer_plugin_fixture" / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    assert plugin_tree_hash(plugin) != base


def test_a_cells_smoke_run_imports_no_module_left_out_of_the_core_hash():
    # The core hash follows the smoke run's import statements; a module it loads in another
    # way (by name, from a string) and that lives in a host-only part would be missed, and
    # editing it would leave stale verdicts in results.json.
    code = (
        "import json, pathlib, sys\n"
        "from puffer_core.testing import smoke\n"
        "report = smoke.smoke('classic', steps=4)\n"
        "assert report['ok'], report\n"
        "root = pathlib.Path(smoke.__file__).resolve().parents[2]\n"
        "mods = [m for n, m in [*sys.modules.items()] if n.startswith('puffer_core') and getattr(m, '__file__', 0)]\n"
        "files = [pathlib.Path(m.__file__).resolve().relative_to(root).as_posix() for m in mods]\n"
        "print(json.dumps(files))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    imported = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "puffer_core/vector/mp/backend.py" in imported  # the vector run happened
    hashed = {path.as_posix() for path in hashed_core_files(ROOT)}
    assert [f for f in imported if f not in hashed] == []
