"""The README and the docs hold together without building the site (`nox -s docs` builds it).

Every relative link resolves (anchors included), the site's navigation lists every page,
the README stays a short page for users, and no prose page carries a date or clock time:
run-by-run figures live in bench-results/ and the pages generated from it.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import unicodedata
from pathlib import Path

import pytest

from puffer_core.specs.declarations import SOURCE_NAME_RE

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATED = {DOCS / "performance.md"}  # python -m puffer_core.bench.results writes it from bench-results/
PROSE = sorted(
    {
        README,
        ROOT / "CONTRIBUTING.md",
        ROOT / "experiments" / "README.md",
        *DOCS.glob("*.md"),
        *(ROOT / "plugins").glob("*/README.md"),
    }
    - GENERATED
)
#: Pages whose links are checked but which carry dates: the changelog's release headings.
DATED = [ROOT / "CHANGELOG.md"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
DATE_OR_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}(:\d{2})?\b")
MAX_README_LINES = 250
#: A region docs/includes.py copies from a file of the repository (a generated one may carry dates).
INCLUDED = re.compile(r"^<!-- include \S+ .*?^<!-- end include -->$", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (MkDocs' default), as GitHub does for these."""
    text = re.sub(r"`([^`]*)`", r"\1", heading).strip()
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    """The anchors of a page: its headings' slugs, and the names its mkdocstrings blocks document."""
    text = strip_code(page.read_text())
    found = {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE)}
    return found | set(re.findall(r"^::: (\S+)", page.read_text(), re.MULTILINE))


def documents(found: set[str], anchor: str) -> bool:
    """Whether ``anchor`` is one of ``found``, or a member of a name documented there (``pkg.errors.X``)."""
    return anchor in found or any(anchor.startswith(f"{name}.") for name in found if name.startswith("puffer_core"))


def strip_code(text: str) -> str:
    """``text`` without fenced code blocks (their ``#`` lines are comments, their brackets code)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(strip_code(page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            problems.append(f"{page.relative_to(ROOT)}: {target} does not exist")
        elif page.parent == DOCS and DOCS not in dest.parents and dest != DOCS:
            problems.append(f"{page.relative_to(ROOT)}: {target} is outside docs/, which the site cannot link to")
        elif anchor and dest.suffix == ".md" and not documents(anchors(dest), anchor):
            problems.append(f"{page.relative_to(ROOT)}: {target} names no heading of {dest.relative_to(ROOT)}")
    return problems


@pytest.mark.parametrize("page", [*PROSE, *GENERATED, *DATED], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


#: Every link out of the project in the pages: these machines cannot open them, so each is
#: listed here, opened by hand when added, and a new one fails the test below until it is.
EXTERNAL_LINKS = {
    "https://docs.ray.io/en/latest/ray-security/index.html",
    "https://docs.ray.io/en/latest/ray-security/token-auth.html",
    "https://github.com/Farama-Foundation/Arcade-Learning-Environment",
    "https://github.com/NetHack-LE/nle",
    "https://github.com/google-deepmind/lab",
    "https://keepachangelog.com/en/1.1.0/",
    "https://pluggy.readthedocs.io/",
    "https://semver.org/spec/v2.0.0.html",
}


def external_links(page: Path) -> set[str]:
    """The links of ``page`` that leave the project (outside its code blocks)."""
    text = strip_code(page.read_text())
    return {t for t in LINK.findall(text) if re.match(r"[a-z]+:", t)} | set(re.findall(r"<(https?://[^>]+)>", text))


def test_every_external_link_is_listed():
    found = set().union(*(external_links(page) for page in [*PROSE, *GENERATED, *DATED]))
    assert sorted(found - EXTERNAL_LINKS) == [], "new external links: open each by hand, then add it to EXTERNAL_LINKS"
    assert sorted(EXTERNAL_LINKS - found) == [], "links no page has any more: remove them from EXTERNAL_LINKS"


def test_the_link_check_catches_a_missing_page_an_anchor_and_a_link_out_of_the_site(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n## Some `code` here\n")
    (docs / "b.md").write_text(
        "[ok](a.md#some-code-here) [missing](c.md) [anchor](a.md#nope) [out](../x.md)\n```\n[code](skip.md)\n```\n"
    )
    (tmp_path / "x.md").write_text("# X\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "DOCS", docs)
    assert broken_links(docs / "b.md") == [
        "docs/b.md: c.md does not exist",
        "docs/b.md: a.md#nope names no heading of docs/a.md",
        "docs/b.md: ../x.md is outside docs/, which the site cannot link to",
    ]


def test_the_site_navigation_lists_every_page_and_only_pages_that_exist():
    nav = re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    assert sorted(nav) == sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))


def test_the_readme_lists_every_page_of_the_site():
    nav = re.findall(r":\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    text = README.read_text()
    section = text[text.index("## Documentation\n") :].split("\n## ", 1)[0]
    assert [page for page in nav if f"](docs/{page})" not in section] == [], "README's Documentation list"


def test_the_readme_is_a_short_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; depth goes to docs/"


def own_text(page: Path) -> str:
    """A page's text without its copies of generated files (docs/includes.py), which their generators own."""
    return INCLUDED.sub("", page.read_text())


@pytest.mark.parametrize("page", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_prose_page_carries_a_date_or_a_clock_time(page):
    found = [m.group(0) for m in DATE_OR_TIME.finditer(own_text(page))]
    assert found == [], f"{page.relative_to(ROOT)}: run history belongs in bench-results/, not prose"


def test_the_date_check_catches_dates_and_times(tmp_path):
    assert DATE_OR_TIME.search("measured on 2026-12-01") and DATE_OR_TIME.search("the 23:48 run")
    page = tmp_path / "p.md"
    page.write_text("a\n<!-- include x.md -->\nrun 2026-12-01\n<!-- end include -->\nb 2026-12-02\n")
    assert [m.group(0) for m in DATE_OR_TIME.finditer(own_text(page))] == ["2026-12-02"]
    assert not DATE_OR_TIME.search("a 3 : 5 split, 16 envs, 1.5× Serial")


def shell_commands(page: Path) -> list[list[str]]:
    """The ``puffer`` and ``ray`` command lines of a page's fenced code blocks (continuation lines
    joined, comments dropped)."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.lstrip().startswith(("puffer ", "ray "))]


def unknown_options(argv: list[str]) -> list[str]:
    """The ``--options`` of a ``puffer`` (or, inside ``puffer tank run -- …``, a ``ray``) command
    line that its command does not have; ``[]`` for other programs."""
    import click

    if not argv or argv[0] not in ("puffer", "ray"):
        return []
    if argv[0] == "ray":
        if importlib.util.find_spec("ray") is None:
            return []
        from ray.scripts.scripts import cli as ray_cli

        command, words = ray_cli, argv[1:]
    else:
        from puffer_core.cli.main import cli as command

        words = argv[1:]
    path = [argv[0]]
    while isinstance(command, click.Group) and words and words[0] in command.commands:
        command, words = command.commands[words[0]], words[1:]
        path.append(command.name)
    own, rest = (words[: words.index("--")], words[words.index("--") + 1 :]) if "--" in words else (words, [])
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
    # `puffer tank build` also takes the build stages' sources, --NAME-source DIR (BuildStage.sources).
    sources = command.context_settings.get("allow_extra_args", False)
    wrong = [
        f"{' '.join(path)} {word}"
        for word in own
        if word.startswith("--")
        and word.split("=")[0] not in known
        and not (sources and SOURCE_NAME_RE.match(word.split("=")[0][2:]))
    ]
    return wrong + unknown_options(rest)


@pytest.mark.parametrize("page", PROSE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_commands_a_page_shows_have_the_options_it_gives_them(page):
    wrong = [problem for argv in shell_commands(page) for problem in unknown_options(argv)]
    assert wrong == [], f"{page.relative_to(ROOT)}: no such option: {', '.join(wrong)}"


def test_the_option_check_catches_a_missing_option_in_puffer_and_in_the_command_tank_runs():
    assert unknown_options(["puffer", "run", "classic/cartpole", "--placement", "spread"]) == []
    assert unknown_options(["puffer", "run", "x", "--speed", "9"]) == ["puffer run --speed"]
    assert unknown_options(["puffer", "tank", "run", "--network", "host", "--", "puffer", "train", "--nope"]) == [
        "puffer train --nope"
    ]
    assert unknown_options(["puffer", "tank", "run", "--", "ray", "start", "--head", "--port", "6379"]) == []
    if importlib.util.find_spec("ray") is not None:
        assert unknown_options(["ray", "start", "--headless"]) == ["ray start --headless"]


@pytest.mark.parametrize("backend", ["serial", "multiprocessing", "ray"])
def test_every_key_a_backend_takes_is_named_in_the_vectorization_page(backend):
    from puffer_core.vector import backend_kwargs_of

    page = (ROOT / "docs" / "vectorization.md").read_text()
    listed = page[page.index("`backend_kwargs_of(backend)`") :].split("\n- ", 1)[0]
    label = {"serial": "Serial", "multiprocessing": "Multiprocessing", "ray": "Ray"}[backend]
    keys = listed.split(f"{label}: ", 1)[1].split(";", 1)[0].split(")", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", keys)) == sorted(backend_kwargs_of(backend)), backend
