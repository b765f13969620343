"""The type and default of each creator kwarg an env takes, and a command line's text parsed by it.

A kwarg's type comes from its plugin's rule in ``EnvSpec.restorable`` where one is declared
(``Flag`` → bool, ``IntRange`` → int, ``AnyOf(IntRange, ListOf(IntRange))`` → int | list[int]),
else from the creator's signature (the annotation, else the default's type). ``--kwarg
preprocess=False`` thus arrives as ``False``, and ``--kwarg frameskip=abc`` is refused as not a number.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.specs.declarations import EnvSpec
from puffer_core.specs.kwarg_rules import AnyOf, Flag, FloatRange, IntRange, KwargRule, ListOf, OneOf, Text

__all__ = ["NO_DEFAULT", "KwargType", "env_kwarg_types", "parse_env_kwargs", "takes_other_kwargs"]

#: The default of a kwarg that has none (the creator requires it, or passes it on unnamed).
NO_DEFAULT: Any = inspect.Parameter.empty

# The kinds a kwarg's type is a union of, in the order a text is tried against them: a list
# before a string (``["A", "B"]`` is a list where both fit), None before a string.
_ORDER = ("none", "bool", "int", "float", "list", "str", "any")
_LABELS = {"none": "None", "bool": "bool", "int": "int", "float": "float", "str": "str", "any": "any"}
_TRUE, _FALSE, _NONE = ("true", "1", "yes"), ("false", "0", "no"), ("none", "null")


@dataclass(frozen=True)
class KwargType:
    """One creator kwarg: its name, the kinds of value it takes, its default, and its item kinds if a list."""

    name: str
    kinds: tuple[str, ...]
    default: Any = NO_DEFAULT
    items: tuple[str, ...] = ()
    choices: tuple[Any, ...] = ()
    #: A list given arrives as a tuple (the creator annotates or defaults it as one: ALE takes no list).
    as_tuple: bool = False

    @property
    def label(self) -> str:
        """The type as one reads it: ``bool``, ``int | list[int]``, ``'impala' | 'full'``."""
        if self.choices:
            return " | ".join(map(repr, self.choices))
        item = " | ".join(_LABELS[kind] for kind in self.items)
        parts = (f"list[{item}]" if kind == "list" and item else _LABELS.get(kind, kind) for kind in self.kinds)
        return " | ".join(parts)

    def parse(self, text: str) -> Any:
        """``text`` as a value of this type; ``ValueError`` saying what it is not (``not a number``)."""
        for kind in sorted(self.kinds, key=_ORDER.index):
            try:
                value = _PARSERS[kind](text)
            except ValueError:
                continue
            if kind == "list" and self.items and not all(_fits(item, self.items) for item in value):
                raise ValueError(f"not a list of {' | '.join(_LABELS[each] for each in self.items)}")
            return tuple(value) if kind == "list" and self.as_tuple else value
        raise ValueError(_what_it_is_not(self.kinds, text))


def _none(text: str) -> None:
    if text.strip().lower() in _NONE:
        return None
    raise ValueError(text)


def _bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(text)


def _int(text: str) -> int:
    return int(text.strip())


def _float(text: str) -> float:
    value = float(text.strip())
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _list(text: str) -> list[Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(text) from exc
    if not isinstance(value, list):
        raise ValueError(text)
    return value


def _str(text: str) -> str:
    # A JSON string ("\"x\"") is its content: the quotes were the shell's way to keep spaces.
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    return text


def _any(text: str) -> Any:
    """A kwarg of unknown type: JSON when it is JSON, Python's True/False/None, else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"True": True, "False": False, "None": None}.get(text, text)


_PARSERS = {"none": _none, "bool": _bool, "int": _int, "float": _float, "list": _list, "str": _str, "any": _any}


def _fits(value: Any, kinds: tuple[str, ...]) -> bool:
    kind = _value_kind(value)
    return kind in kinds or "any" in kinds or (kind == "int" and "float" in kinds)


def _what_it_is_not(kinds: tuple[str, ...], text: str) -> str:
    """What ``text`` fails to be: ``not a number`` for a numeric kwarg unless it was meant as a list."""
    if "list" in kinds and text.lstrip().startswith("["):
        return "not a JSON list"
    if "int" in kinds and "float" not in kinds and "str" not in kinds and _is_number(text):
        return "not a whole number"
    if {"int", "float"} & set(kinds) and "str" not in kinds:
        return "not a number"
    if set(kinds) <= {"bool", "none"}:
        return "not true or false"
    if set(kinds) <= {"list", "none"}:
        return "not a JSON list"
    return "not a " + " or ".join(_LABELS.get(kind, kind) for kind in kinds)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text.strip()))
    except ValueError:
        return False


def _rule_kinds(rule: KwargRule) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Any, ...]]:
    """(kinds, item kinds, string choices) a rule takes."""
    if isinstance(rule, Flag):
        return ("bool",), (), ()
    if isinstance(rule, IntRange):
        return ("int",), (), ()
    if isinstance(rule, FloatRange):
        return ("float",), (), ()
    if isinstance(rule, Text):
        return ("str",), (), ()
    if isinstance(rule, ListOf):
        return ("list",), _rule_kinds(rule.item)[0], ()
    if isinstance(rule, OneOf):
        kinds = tuple(dict.fromkeys(_value_kind(choice) for choice in rule.choices))
        return kinds, (), rule.choices if kinds == ("str",) else ()
    if isinstance(rule, AnyOf):
        parts = [_rule_kinds(each) for each in rule.rules]
        kinds = tuple(dict.fromkeys(kind for part in parts for kind in part[0]))
        items = tuple(dict.fromkeys(kind for part in parts for kind in part[1]))
        return kinds, items, ()
    return ("any",), (), ()


def _value_kind(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    return "any"


def _names_tuple(annotation: Any) -> bool:
    """Whether an annotation names a tuple (``int | tuple[int, int]``)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_names_tuple(arg) for arg in typing.get_args(annotation))
    return (typing.get_origin(annotation) or annotation) is tuple


def _annotation_kinds(annotation: Any) -> tuple[str, ...]:
    """The kinds an annotation names (``int | tuple[int, int]`` → int, list); () when it says none."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_annotation_kinds(arg) for arg in typing.get_args(annotation)]
        return () if () in parts else tuple(dict.fromkeys(kind for part in parts for kind in part))
    if origin is typing.Literal:
        return tuple(dict.fromkeys(_value_kind(value) for value in typing.get_args(annotation)))
    base = origin or annotation
    if base is type(None) or annotation is None:
        return ("none",)
    if isinstance(base, type):
        if base is bool:
            return ("bool",)
        if base is int:
            return ("int",)
        if base is float:
            return ("float",)
        if base is str:
            return ("str",)
        if issubclass(base, (list, tuple)) or base is Sequence:
            return ("list",)
    return ()


def _signature(creator: Any) -> tuple[inspect.Signature | None, dict[str, Any]]:
    """The creator's signature (partials resolved) and its annotations, evaluated where they can be."""
    try:
        signature = inspect.signature(creator)
    except (TypeError, ValueError):
        return None, {}
    target = creator
    while isinstance(target, functools.partial):
        target = target.func
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # an annotation naming what the module imports only for type checkers
        hints = {}
    return signature, hints


_PASSED_ON = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _types_of(spec: EnvSpec) -> tuple[dict[str, KwargType], bool]:
    signature, hints = _signature(spec.creator)
    found: dict[str, KwargType] = {}
    open_ended = signature is None
    for parameter in signature.parameters.values() if signature is not None else ():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            open_ended = True
        if parameter.kind not in _PASSED_ON:
            continue
        default = parameter.default
        kinds = _annotation_kinds(hints[parameter.name]) if parameter.name in hints else ()
        if not kinds and default is not NO_DEFAULT:
            kinds = (_value_kind(default),) + (("none",) if default is None else ())
        annotated = parameter.name in hints  # the annotation says list or tuple, else the default does
        as_tuple = _names_tuple(hints[parameter.name]) if annotated else isinstance(default, tuple)
        kinds = tuple(dict.fromkeys(kinds or ("any",)))
        found[parameter.name] = KwargType(parameter.name, kinds, default, as_tuple=as_tuple)
    for name, rule in spec.restorable.items():
        kinds, items, choices = _rule_kinds(rule)
        known = found.get(name) or KwargType(name, kinds)
        found[name] = KwargType(name, kinds, known.default, items, choices, known.as_tuple)
    for name, value in spec.kwargs.items():
        known = found.get(name) or KwargType(name, (_value_kind(value),))
        as_tuple = known.as_tuple or isinstance(value, tuple)
        found[name] = KwargType(name, known.kinds, value, known.items, known.choices, as_tuple)
    return found, open_ended


def env_kwarg_types(spec: EnvSpec) -> dict[str, KwargType]:
    """Every kwarg ``spec``'s creator is known to take, by name: its plugin's rules, the spec's
    defaults and the creator's named parameters (the spec's defaults win over the signature's)."""
    return dict(_types_of(spec)[0])


def takes_other_kwargs(spec: EnvSpec) -> bool:
    """Whether the creator takes kwargs beyond the named ones (``**kwargs``), passed on unnamed."""
    return _types_of(spec)[1]


def parse_env_kwargs(spec: EnvSpec, texts: Mapping[str, str], option: str = "--kwarg") -> dict[str, Any]:
    """``{name: text}`` from a command line as the creator's values, each parsed by its type.

    Raises:
        APIUsageError: one line naming the kwarg, its type and the text that is not one
            (``--kwarg frameskip=abc: not a number ...``), or a name the env does not take
            (with the closest it does).
    """
    known = env_kwarg_types(spec)
    values: dict[str, Any] = {}
    for name, text in texts.items():
        kind = known.get(name)
        if kind is None:
            values[name] = _unknown(spec, name, text, known, option)
            continue
        try:
            values[name] = kind.parse(text)
        except ValueError as exc:
            raise APIUsageError(
                f"{option} {name}={text}: {exc}; {spec.id}'s {name} takes {kind.label}"
                + (f" (default {kind.default!r})" if kind.default is not NO_DEFAULT else "")
            ) from None
        # The plugin's bounds of a kwarg it declares restorable hold for a value typed here too.
        rule = spec.restorable.get(name)
        problem = rule.problem(values[name]) if rule is not None else None
        if problem is not None:
            raise APIUsageError(f"{option} {name}={text}: {problem}")
    return values


def _unknown(spec: EnvSpec, name: str, text: str, known: dict[str, KwargType], option: str) -> Any:
    """A kwarg no rule or signature names: a near miss is a typo; else the creator may take it unnamed."""
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        raise APIUsageError(f"{option} {name}: {spec.id} takes no kwarg {name!r}; did you mean {close[0]}?")
    if not takes_other_kwargs(spec):
        takes = ", ".join(sorted(known)) or "none"
        raise APIUsageError(f"{option} {name}: {spec.id} takes no kwarg {name!r}; it takes: {takes}")
    return _any(text)
