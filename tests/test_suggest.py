"""`puffer_core.specs.suggest`: did-you-mean from close spellings and other libraries' names."""

from __future__ import annotations

from puffer_core.specs.suggest import close_names, did_you_mean

CHOICES = ["learning_rate", "rollout_steps", "ent_coef", "gamma"]
ALIASES = {"lr": "learning_rate", "n_steps": "rollout_steps"}


def test_an_alias_comes_first_then_close_spellings():
    assert close_names("lr", CHOICES, ALIASES) == ["learning_rate"]
    assert close_names("N_STEPS", CHOICES, ALIASES) == ["rollout_steps"]
    assert close_names("gamm", CHOICES) == ["gamma"]
    assert close_names("entcoef", CHOICES) == ["ent_coef"]


def test_nothing_close_says_nothing():
    assert did_you_mean("turbo", CHOICES, ALIASES) == ""
    assert did_you_mean("lr", CHOICES, ALIASES) == " (did you mean learning_rate?)"


def test_an_alias_to_a_name_not_among_the_choices_is_not_offered():
    assert close_names("lr", ["gamma"], ALIASES) == []
