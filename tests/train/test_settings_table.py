"""`puffer_core.train.settings_table`: docs/settings.md is what the config generates, and every
setting of the config is in it, with its meaning from the field's docstring."""

from __future__ import annotations

import dataclasses

from puffer_core.train import settings_table
from puffer_core.train.config import PPOConfig


def test_the_page_is_not_stale():
    assert settings_table.main(["--check"]) == 0, "run python -m puffer_core.train.settings_table"
    assert settings_table.SETTINGS_PAGE.read_text().splitlines()[0] == settings_table.NOTICE


def test_every_setting_has_a_meaning_and_a_row():
    names = [field.name for field in dataclasses.fields(PPOConfig)]
    docs = settings_table.field_docs()
    assert sorted(docs) == sorted(names), set(names) ^ set(docs)
    assert all(docs.values())
    rows = [line for line in settings_table.markdown().splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{name}`" for name in names]
    for row, name in zip(rows, names):
        assert row.endswith(f" | {docs[name]} |"), row


def test_a_plugin_family_gets_a_column_of_its_own_defaults():
    families = settings_table.family_defaults()
    assert families["nethack/*"]["policy"] == "lstm"
    header = next(line for line in settings_table.markdown().splitlines() if line.startswith("| setting"))
    assert header == "| setting | type | default | `nethack/*` | meaning |"
    policy = next(line for line in settings_table.markdown().splitlines() if line.startswith("| `policy`"))
    assert policy.startswith("| `policy` | str | `'mlp'` | `'lstm'` | mlp, or lstm")
