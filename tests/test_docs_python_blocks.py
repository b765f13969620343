"""Every ```python block of README.md and docs/*.md runs as a file, as a reader who saves it runs it.

Each block is written to a file in a temp folder and run there by this Python in a subprocess
with a timeout. A block is left out only by an HTML comment on the lines just above its fence:

- ``<!-- not run: WHY -->``: a fragment, or it needs what no test machine has (a Ray cluster,
  DeepMind Lab); WHY is said;
- ``<!-- include examples/X.py … -->`` (written by ``python docs/includes.py``): the script
  itself, which tests/test_examples.py runs;

``<!-- needs MODULE … -->`` runs a block only where those modules import (torch,
stable_baselines3; a test session that requires torch fails instead), and
``<!-- notebook cell -->`` runs it as Jupyter does, with no file behind the main module
(``python -c``). ``LEFT_OUT`` counts the blocks left out per page, so a marker put where it
does not belong fails a test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from optional import require

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
COMMENT = re.compile(r"^<!--(.*?)-->$")
#: Blocks left out, per page: a new marker must be counted here (and say why in the page).
LEFT_OUT = {
    "docs/examples.md": 5,  # the scripts of examples/, included whole: tests/test_examples.py runs them
    "docs/vectorization.md": 2,  # a Ray cluster; autotune's printed line (a fragment)
    "docs/your-env.md": 2,  # scaffold and corridor.py's companions: tests/test_examples.py runs them there
}
#: Seconds a block may take: doc examples use small step counts.
TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    """One ```python block of a page: its code, line and the markers just above its fence."""

    page: str
    line: int
    code: str
    markers: tuple[str, ...]

    @property
    def left_out(self) -> str | None:
        """Why the block is not run (None: it runs)."""
        for marker in self.markers:
            if marker.startswith("not run:"):
                return marker.removeprefix("not run:").strip() or None
            if marker.startswith("include examples/"):
                return f"{marker.split()[1]} runs in tests/test_examples.py"
        return None

    @property
    def needs(self) -> tuple[str, ...]:
        """The modules the block needs beyond Puffer Core's own dependencies."""
        return tuple(name for m in self.markers if m.startswith("needs ") for name in m.split()[1:])

    @property
    def notebook_cell(self) -> bool:
        return "notebook cell" in self.markers

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def markers_above(lines: list[str], index: int) -> tuple[str, ...]:
    """The HTML comments on the lines right above line ``index`` (blank lines between them skipped)."""
    found = []
    i = index - 1
    while i >= 0 and (not lines[i].strip() or COMMENT.match(lines[i].strip())):
        if lines[i].strip():
            found.append(COMMENT.match(lines[i].strip())[1].strip())
        i -= 1
    return tuple(found)


def blocks_of(text: str, page: str) -> list[Block]:
    """The ```python blocks of a page's text."""
    lines = text.splitlines()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start())
        found.append(Block(page, line + 1, match.group(1), markers_above(lines, line)))
    return found


def page_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks_of(page.read_text(), str(page.relative_to(ROOT)))]


BLOCKS = page_blocks()


def test_the_blocks_left_out_are_the_ones_counted():
    left_out: dict[str, int] = {}
    for block in BLOCKS:
        if block.left_out:
            left_out[block.page] = left_out.get(block.page, 0) + 1
    assert {page: n for page, n in left_out.items() if n} == {page: n for page, n in LEFT_OUT.items() if n}
    assert len([b for b in BLOCKS if not b.left_out]) >= 20, "most blocks run: a marker went wrong"


def test_every_marker_above_a_block_is_one_this_test_knows():
    known = ("not run:", "needs ", "notebook cell", "include ", "fmt: off", "fmt: on", "end include")
    unknown = [f"{block}: <!-- {m} -->" for block in BLOCKS for m in block.markers if not m.startswith(known)]
    assert unknown == []
    unexplained = [str(block) for block in BLOCKS for m in block.markers if m.strip() == "not run:"]
    assert unexplained == [], "a `not run:` marker says why"


def test_the_markers_are_read_as_written():
    page = (
        "x\n<!-- not run: needs a Ray cluster -->\n```python\na = 1\n```\n\n"
        "<!-- needs torch stable_baselines3 -->\n\n```python\nimport torch\n```\n"
        "text\n```python\nb = 2\n```\n<!-- not run: -->\n```python\nc\n```\n"
        "<!-- notebook cell -->\n```python\nd\n```\n"
    )
    blocks = blocks_of(page, "p.md")
    assert [(b.line, b.code, b.left_out, b.needs, b.notebook_cell) for b in blocks] == [
        (3, "a = 1\n", "needs a Ray cluster", (), False),
        (9, "import torch\n", None, ("torch", "stable_baselines3"), False),
        (13, "b = 2\n", None, (), False),
        (17, "c\n", None, (), False),  # a marker without a reason leaves nothing out
        (21, "d\n", None, (), True),
    ]


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.left_out], ids=str)
def test_the_block_runs_as_a_file(block, tmp_path):
    for module in block.needs:
        require(module)
    if "torch" not in block.needs and re.search(r"\btorch\b|puffer_core\.train\b", block.code):
        pytest.fail(f"{block} uses torch: mark it <!-- needs torch -->")
    script = tmp_path / "block.py"
    script.write_text(block.code)
    # A notebook has no file behind its main module: `python -c` runs a cell the same way.
    argv = [sys.executable, "-c", block.code] if block.notebook_cell else [sys.executable, script.name]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{block} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


def test_a_notebook_cell_needs_no_guard_but_the_same_code_as_a_file_does(tmp_path):
    """What docs/vectorization.md says of notebooks: the cell that runs under ``python -c`` fails
    as a script, whose workers import it (the guard is a script's rule, not a notebook's)."""
    (cell,) = [block for block in BLOCKS if block.notebook_cell]
    ran = subprocess.run([sys.executable, "-c", cell.code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.startswith("forkserver [1. 1. 1. 1.]"), ran.stderr[-2000:]
    (tmp_path / "cell.py").write_text(cell.code)
    as_file = subprocess.run([sys.executable, "cell.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert as_file.returncode != 0 and "__name__ == '__main__'" in as_file.stderr
