"""Run Python or ``puffer`` in a fresh interpreter, optionally as if some packages were missing.

For plugin tests: "``puffer envs`` still lists my envs when nle is not installed" needs a
process whose imports of ``nle`` fail, without uninstalling anything::

    from puffer_core.testing.isolation import envs_json
    envs = envs_json("--plugin", "nethack", block=("nle",))
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

__all__ = ["BLOCK_IMPORT", "envs_json", "run_puffer", "run_python"]

#: Python prepended to a subprocess to make ``import <name>`` fail as if it were not
#: installed: a meta path finder ahead of the real ones refuses the name and its
#: submodules (find_spec raising is what importlib does for a missing module).
BLOCK_IMPORT = textwrap.dedent(
    """
    import importlib.abc, sys

    class _Block(importlib.abc.MetaPathFinder):
        def __init__(self, names):
            self.names = names

        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in self.names:
                raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
            return None

    sys.meta_path.insert(0, _Block(NAMES))
    """
)


def run_python(
    code: str, block: tuple[str, ...] = (), timeout: float = 120, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``code`` (dedented) in a new interpreter where the top-level packages in ``block`` cannot be imported."""
    prelude = BLOCK_IMPORT.replace("NAMES", repr(set(block))) if block else ""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def run_puffer(
    *args: str, block: tuple[str, ...] = (), timeout: float = 120, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``puffer ARGS`` in a new interpreter (through the CLI's main, so imports can be blocked)."""
    code = f"""
    import sys
    from puffer_core.cli.main import main
    sys.argv = ["puffer", *{list(args)!r}]
    main()
    """
    return run_python(code, block=block, timeout=timeout, extra_env=extra_env)


def envs_json(*args: str, block: tuple[str, ...] = (), extra_env: dict[str, str] | None = None) -> dict:
    """``puffer envs --json ARGS`` parsed; raises AssertionError with its stderr when it fails."""
    result = run_puffer("envs", "--json", *args, block=block, extra_env=extra_env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
