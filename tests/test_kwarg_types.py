"""`puffer_core.specs.kwarg_types`: each creator kwarg's type, from its plugin's rules or the creator's
signature, and a command line's text parsed by it."""

from __future__ import annotations

import pytest

from puffer_core import AnyOf, EnvSpec, Flag, IntRange, ListOf, OneOf
from puffer_core.errors import APIUsageError
from puffer_core.plugins import load_plugins
from puffer_core.specs.kwarg_types import NO_DEFAULT, env_kwarg_types, parse_env_kwargs, takes_other_kwargs


def annotated(level: str, *, fast: bool = False, size: int | None = None, scale: float = 1.0, tags: list[str] = ()):
    return None


def untyped(steps=10, name="x"):
    return None


def open_ended(**kwargs):
    return None


RULED = EnvSpec(
    "p/ruled",
    open_ended,
    kwargs={"level": "maze"},
    restorable={"skip": AnyOf(IntRange(1, 16), ListOf(IntRange(1, 16))), "flag": Flag(), "set": OneOf("a", "b")},
)


def test_types_come_from_rules_then_annotations_then_defaults():
    typed = env_kwarg_types(EnvSpec("p/typed", annotated, kwargs={"level": "maze"}))
    assert {name: kind.label for name, kind in typed.items()} == {
        "level": "str",
        "fast": "bool",
        "size": "int | None",
        "scale": "float",
        "tags": "list",
    }
    assert typed["level"].default == "maze" and typed["size"].default is None
    untyped_kinds = env_kwarg_types(EnvSpec("p/untyped", untyped))
    assert (untyped_kinds["steps"].label, untyped_kinds["name"].label) == ("int", "str")
    ruled = env_kwarg_types(RULED)
    assert (ruled["skip"].label, ruled["flag"].label, ruled["set"].label) == ("int | list[int]", "bool", "'a' | 'b'")
    assert ruled["skip"].default is NO_DEFAULT and ruled["level"].default == "maze"
    assert takes_other_kwargs(RULED) and not takes_other_kwargs(EnvSpec("p/untyped", untyped))


@pytest.mark.parametrize(("false", "true"), [("False", "True"), ("false", "true"), ("0", "1"), ("FALSE", "TRUE")])
def test_a_bool_takes_true_and_false_spelled_as_people_do(false, true):
    assert parse_env_kwargs(RULED, {"flag": false}) == {"flag": False}
    assert parse_env_kwargs(RULED, {"flag": true}) == {"flag": True}


def test_values_arrive_as_their_type_and_lists_still_parse_as_json():
    spec = EnvSpec("p/typed", annotated)
    parsed = parse_env_kwargs(spec, {"size": "None", "scale": "2", "tags": '["a", "b"]', "level": "x y"})
    assert parsed == {"size": None, "scale": 2.0, "tags": ["a", "b"], "level": "x y"}
    assert parse_env_kwargs(RULED, {"skip": "3"}) == {"skip": 3}
    assert parse_env_kwargs(RULED, {"skip": "[2, 5]"}) == {"skip": [2, 5]}
    # A kwarg passed on unnamed (**kwargs) keeps the old reading: JSON, Python's spellings, else text.
    assert parse_env_kwargs(RULED, {"render_mode": "rgb_array", "seed_list": "[1]", "on": "True"}) == {
        "render_mode": "rgb_array",
        "seed_list": [1],
        "on": True,
    }


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ({"skip": "abc"}, "--kwarg skip=abc: not a number; p/ruled's skip takes int | list[int]"),
        ({"skip": '["a"]'}, '--kwarg skip=["a"]: not a list of int; p/ruled\'s skip takes int | list[int]'),
        ({"flag": "maybe"}, "--kwarg flag=maybe: not true or false; p/ruled's flag takes bool"),
        ({"skp": "3"}, "--kwarg skp: p/ruled takes no kwarg 'skp'; did you mean skip?"),
        ({"skip": "1.5"}, "--kwarg skip=1.5: not a whole number; p/ruled's skip takes int | list[int]"),
        ({"skip": "-3"}, "--kwarg skip=-3: "),  # a number, outside the bounds the plugin declares
        ({"skip": "[2, 99]"}, "--kwarg skip=[2, 99]: "),
    ],
)
def test_a_wrong_value_is_one_line_naming_the_kwarg_its_type_and_the_value(texts, message):
    with pytest.raises(APIUsageError) as caught:
        parse_env_kwargs(RULED, texts)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_creator_without_kwargs_names_what_it_takes():
    with pytest.raises(APIUsageError, match="p/untyped takes no kwarg 'colour'; it takes: name, steps"):
        parse_env_kwargs(EnvSpec("p/untyped", untyped), {"colour": "red"})


def test_the_installed_plugins_types_read_from_their_declarations():
    specs = load_plugins().env_specs
    cartpole = env_kwarg_types(specs["classic/cartpole"])
    assert cartpole["sutton_barto_reward"].label == "bool" and cartpole["max_episode_steps"].label == "int"
    assert env_kwarg_types(specs["classic/probe_1"])["number"].default == 1
