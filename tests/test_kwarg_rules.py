"""`puffer_core.specs.kwarg_rules` and `EnvSpec.restorable`: what a creator kwarg read from a checkpoint
may hold, declared per env by its plugin, with sizes bounded."""

from __future__ import annotations

import pytest

from puffer_core import AnyOf, EnvSpec, Flag, FloatRange, IntRange, ListOf, OneOf, Text
from puffer_core.errors import PluginError
from puffer_core.plugins import load_plugins


def creator(**kwargs):
    return None


@pytest.mark.parametrize(
    ("rule", "good", "bad", "why"),
    [
        (IntRange(1, 16), [1, 16, 4], [0, 17, 4.0, True, "4", None], "must be an int from 1 to 16"),
        (FloatRange(0, 1), [0, 0.25, 1], [-0.1, 1.5, float("nan"), float("inf"), True, "0.5"], "must be a number in"),
        (Flag(), [True, False], [0, 1, "true", None], "must be true or false"),
        (OneOf("lean", "all", None), ["lean", "all", None], ["LEAN", 0, "", ["lean"]], "must be one of 'lean'"),
        (OneOf(3, 5), [3, 5], [True, 3.0, 4], "must be one of 3, 5"),
        (Text(8, r"[a-z_]+"), ["glyphs", "a_b"], ["GLYPHS", "x" * 9, "a\x1b]0;", "a\nb", 7], "must"),
        (ListOf(IntRange(1, 16), 2), [[1], (4, 5), []], [[1, 2, 3], [0], "12", 4], "must"),
        (AnyOf(IntRange(1, 9), OneOf(None)), [1, None], [0, "x", 10], "must be an int from 1 to 9, or must be one"),
    ],
)
def test_each_rule_takes_what_it_says_and_names_the_rest(rule, good, bad, why):
    assert [rule.problem(value) for value in good] == [None] * len(good)
    for value in bad:
        problem = rule.problem(value)
        assert problem is not None and problem.startswith("must"), (value, problem)
    assert why in rule.problem(bad[0])


def test_a_value_is_checked_against_its_kwargs_rule_and_undeclared_kwargs_are_named():
    spec = EnvSpec("p/env", creator, restorable={"frame_stack": IntRange(1, 16), "grayscale": Flag()})
    assert spec.unrestorable({"frame_stack": 4, "grayscale": False}) == {}
    assert spec.unrestorable({"frame_stack": 100_000, "savedir": "/tmp/x"}) == {
        "frame_stack": "must be an int from 1 to 16",
        "savedir": "is not one the plugin declares restorable",
    }


@pytest.mark.parametrize(
    ("restorable", "train_kwargs", "fragment"),
    [
        ({"frame stack": IntRange(1, 4)}, {}, "must map kwarg names to rules"),
        ({"frame_stack": (1, 4)}, {}, "must map kwarg names to rules"),
        ([("frame_stack", IntRange(1, 4))], {}, "must map kwarg names to rules"),
        ({"frame_stack": IntRange(1, 4)}, {"frame_stack": 8}, "refuses train_kwargs frame_stack=8: it must be an int"),
    ],
)
def test_a_bad_schema_is_the_plugins_error(restorable, train_kwargs, fragment):
    spec = EnvSpec("p/env", creator, restorable=restorable, train_kwargs=train_kwargs)
    with pytest.raises(PluginError) as caught:
        spec.validate("p")
    assert caught.value.field == "restorable" and fragment in str(caught.value)


def test_a_plugins_own_train_kwargs_come_back_as_they_are_and_only_so():
    spec = EnvSpec("p/env", creator, train_kwargs={"observation_keys": ("glyphs", "blstats"), "stack": 4})
    spec.validate("p")
    assert spec.unrestorable({"observation_keys": ("glyphs", "blstats"), "stack": 4}) == {}
    refused = spec.unrestorable({"observation_keys": ("glyphs", "internal"), "stack": 4.0})
    assert set(refused) == {"observation_keys", "stack"}


def test_the_positional_signature_is_unchanged():
    spec = EnvSpec("p/env", creator, {"a": 1}, "gym", "one line")
    assert (spec.kwargs, spec.api, spec.description, spec.restorable) == ({"a": 1}, "gym", "one line", {})


PLUGINS = load_plugins()


@pytest.mark.parametrize(
    ("env_id", "declared"),
    [
        ("nethack/score", {"observation_keys", "crop_size", "max_episode_steps", "character"}),
        ("atari/pong", {"frame_stack", "screen_size", "frameskip", "repeat_action_probability", "grayscale"}),
        ("pettingzoo/pistonball", {"max_cycles", "n_pistons", "continuous"}),
        ("dmlab/seekavoid_arena_01", {"width", "height", "num_steps", "observations"}),
        ("classic/cartpole", {"max_episode_steps"}),
        ("classic/probe_2", {"number"}),
        ("classic/probe_memory", {"blank_steps"}),
    ],
)
def test_every_published_plugin_declares_what_its_training_runs_pass(env_id, declared):
    spec = PLUGINS.get_spec(env_id)
    assert declared <= set(spec.restorable), sorted(spec.restorable)
    assert spec.unrestorable(spec.train_kwargs) == {}


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("nethack/score", {"savedir": "/tmp/elsewhere", "save_ttyrec_every": 1, "options": ("autopickup",)}),
        ("nethack/score", {"crop_size": 10_001, "observation_keys": ["glyphs"] * 33}),
        ("atari/breakout", {"frame_stack": 1_000_000, "screen_size": 100_000}),
        ("dmlab/seekavoid_arena_01", {"level_cache_dir": "/tmp/cache", "width": 100_000, "level": "/x.lua"}),
    ],
)
def test_what_writes_files_or_sizes_without_bound_is_not_restorable(env_id, kwargs):
    assert set(PLUGINS.get_spec(env_id).unrestorable(kwargs)) == set(kwargs)
