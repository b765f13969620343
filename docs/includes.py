"""Copy files of the repository into the docs pages that show them: ``python docs/includes.py``.

A page marks each copy with ``<!-- include PATH … -->`` and ``<!-- end include -->``; this
script rewrites what lies between from PATH (relative to the repository's root): a code file
inside a fence of its language, a Markdown file as it is. The copy reads the same on the code
host and on the site, where an include directive would show as bare text on the code host.
``--check`` writes nothing and exits 1 naming the stale pages (tests/test_docs_includes.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REGION = re.compile(
    r"^(<!-- include (?P<path>\S+) .*?-->\n)(?P<body>.*?)^(<!-- end include -->)$", re.MULTILINE | re.DOTALL
)
#: The fence language of a file's suffix; a suffix not listed is copied as Markdown.
LANGUAGES = {".py": "python", ".yml": "yaml", ".yaml": "yaml", ".toml": "toml", ".sh": "bash"}
HEADER = "<!-- include {path} (python docs/includes.py copies it here: edit the file, then run it) -->\n"


def body_of(path: str) -> str:
    """What a region that includes ``path`` holds."""
    source = ROOT / path
    if not source.is_file():
        raise SystemExit(f"docs/includes.py: {path} does not exist; fix the include marker's path")
    text = source.read_text().rstrip("\n") + "\n"
    language = LANGUAGES.get(source.suffix)
    if language is None:
        return f"\n{text}\n"
    # fmt: off keeps ruff's Markdown formatting off the copy: the file itself is what ruff checks.
    return f"<!-- fmt: off -->\n```{language}\n{text}```\n<!-- fmt: on -->\n"


def render(text: str) -> str:
    """``text`` with every include region holding its file's present content."""
    return REGION.sub(lambda m: HEADER.format(path=m["path"]) + body_of(m["path"]) + m[4], text)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for page in pages():
        text = page.read_text()
        new = render(text)
        if new != text:
            stale.append(str(page.relative_to(ROOT)))
            if not check:
                page.write_text(new)
    if check and stale:
        print(f"stale includes in {', '.join(stale)}: run python docs/includes.py", file=sys.stderr)
        return 1
    for name in stale:
        print(f"rewrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
