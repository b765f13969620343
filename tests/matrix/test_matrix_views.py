"""compat_matrix/README.md and index.html rendered from results.json."""

from __future__ import annotations

import re

from matrix_samples import results_data

from puffer_core.matrix import views


def test_markdown_has_a_table_per_plugin_with_reasons_and_legend():
    text = views.render_markdown(results_data())
    assert text.startswith("<!-- GENERATED")
    assert "| gymnasium (companion pins) | Python 3.11 | Python 3.12 |" in text
    assert "**gymnasium 1.2.0**<br>numpy 2.2.6" in text
    assert "🚫 excluded: too old \\| for 3.12" in text  # the reason, with the pipe escaped
    assert "📦❌ install-failed 3.2 s" in text and "no wheel" in text
    assert "3.0 cells per minute" in text
    assert "## Legend" in text and "`interpreter-missing`" in text
    assert "broken" in text and "could not be loaded" in text
    html = views.render_html(results_data())
    assert "<table" in html and "background:#d7f5dd" in html and "too old | for 3.12" in html


#: Index and log text as an attacker would write it: an element with a handler, a link, code, emphasis, a cell.
HOSTILE = "<img/src=x onerror=alert(1)> [click](javascript:alert(2)) `tick` *em* a|b &amp;"
#: The only tags the renderers write themselves.
OWN_MARKDOWN_TAGS = re.compile(r"<br>|</?details>|</?summary>|<!-- GENERATED[^>]*-->|<!-- Regenerate[^>]*-->")
OWN_HTML_TAGS = re.compile(
    r"</?(html|head|meta|title|style|body|h1|h2|p|b|code|table|tr|t[hd]|br|small|ul|li)\b[^<>]*>"
)
#: A Markdown code span: a run of backticks, then text, then a run of as many (CommonMark's rule).
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def hostile_results() -> dict:
    """The sample results with index-provided and log-provided text in every place a renderer shows."""
    data = results_data()
    cells = data["cells"]
    cells["fixture-gymnasium1.0.0-py3.12"]["error"] = "<img src=x onerror=alert(3)>"  # short: shown in the cell
    cells["fixture-gymnasium1.2.0-py3.12"]["error"] = f"pkg declares Requires-Python {HOSTILE}"  # a note
    passed = cells["fixture-gymnasium1.2.0-py3.11"]
    passed["companions"] = {"numpy": "2.2.6<script>alert(4)</script>"}
    passed["resolved"] = {"evil<script>": "1.0 [x](javascript:alert(5))"}
    passed["envs"] = ["fixture/<img src=x onerror=alert(6)>"]
    data["plugins"]["broken"]["error"] = HOSTILE
    data["runs"]["last"] = {"ran": 1, "selection": {"plugin": ["<img src=x onerror=alert(7)>"]}}
    data["common"] = {
        "python": "3.11",
        "joint": {"id": "common-py3.11`<img src=x>", "outcome": "pass"},
        "members": [{"plugin": "fixture", "distribution": "<b>d</b>", "pins": {"gymnasium": HOSTILE}, "newest": True}],
        "dropped": {"broken<img src=x>": HOSTILE},
    }
    return data


def test_markdown_shows_index_and_log_text_as_text():
    text = views.render_markdown(hostile_results())
    leftover = CODE_SPAN.sub("", OWN_MARKDOWN_TAGS.sub("", text))  # a code span shows its text as it is
    assert "<" not in leftover and ">" not in leftover  # no element of anyone else's
    assert "&lt;img/src=x onerror=alert(1)&gt;" in text and "&lt;script&gt;" in text
    assert "](javascript:" not in text.replace("\\](javascript:", "")  # every link's bracket escaped
    assert "\\[click\\](javascript:alert(2)) \\`tick\\` \\*em\\* a\\|b &amp;amp;" in text
    assert "&#91;x&#93;(javascript:alert(5))" in text  # in the raw-HTML <details>: entities only
    columns = None  # every row of a table has its header's cells: a text's pipes are all escaped
    for line in text.splitlines():
        pipes = len(re.findall(r"(?<!\\)\|", line)) if line.startswith("| ") else None
        columns = (columns or pipes) if pipes else None
        assert pipes == columns, line


def test_html_shows_index_and_log_text_as_text():
    text = views.render_html(hostile_results())
    leftover = OWN_HTML_TAGS.sub("", text.replace("<!DOCTYPE html>", "")).replace(views.GENERATED, "")
    assert "<" not in leftover and ">" not in leftover
    assert "&lt;img/src=x onerror=alert(1)&gt;" in text and 'title="&lt;img src=x onerror=alert(3)&gt;"' in text


def test_md_text_escapes_what_markdown_reads():
    assert views.md_text("a<b>&c\n[l](u) *e* _u_ `c` \\ |") == (
        "a&lt;b&gt;&amp;c \\[l\\](u) \\*e\\* \\_u\\_ \\`c\\` \\\\ \\|"
    )
