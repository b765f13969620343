"""The pages' copies of repository files (docs/includes.py) are the files as they are now."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs" / "includes.py"


def load_includes():
    spec = importlib.util.spec_from_file_location("docs_includes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_include_is_up_to_date():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_no_page_uses_an_include_directive_the_code_host_shows_as_text():
    includes = load_includes()
    found = [str(page.relative_to(ROOT)) for page in includes.pages() if re.search(r"^-+8<-+", page.read_text(), re.M)]
    assert found == [], "copy the file with <!-- include PATH --> ... <!-- end include --> (docs/includes.py)"


def test_a_region_is_rewritten_from_its_file_and_a_stale_one_is_found():
    includes = load_includes()
    stale = "text\n<!-- include examples/own_env.py -->\nold copy\n<!-- end include -->\nmore\n"
    fresh = includes.render(stale)
    source = (ROOT / "examples" / "own_env.py").read_text()
    assert fresh.startswith("text\n<!-- include examples/own_env.py (python docs/includes.py")
    assert f"```python\n{source}```\n<!-- fmt: on -->\n<!-- end include -->\nmore\n" in fresh
    assert includes.render(fresh) == fresh  # rendering is stable: --check passes right after a run
    markdown = includes.render("<!-- include compat_matrix/README.md -->\n<!-- end include -->\n")
    assert "```" not in markdown.split("\n", 2)[1] and "# Compatibility matrix" in markdown


def test_a_missing_file_is_named():
    includes = load_includes()
    try:
        includes.render("<!-- include examples/nope.py -->\n<!-- end include -->\n")
    except SystemExit as exc:
        assert "examples/nope.py does not exist" in str(exc)
    else:
        raise AssertionError("a missing file was not reported")
