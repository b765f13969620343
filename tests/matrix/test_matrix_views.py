"""compat_matrix/README.md and index.html rendered from results.json."""

from __future__ import annotations

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
