"""`puffer_core.train.saved_data` and what `checkpoint.load` makes of a checkpoint's fields: plain
trees of bounded size, printed short. A pickle-memo "billion laughs" in the env kwargs (a few
hundred bytes, 2**60 items as a tree) is refused in bounded time and memory; an env id read
from a file is checked against the id grammar and printed with repr, never raw, and never
turned into an install hint."""

from __future__ import annotations

import pytest
from optional import require
from plugin_site import puffer_env, run_puffer_many
from process_checks import run_measured
from stored_run import OLD_CHECKPOINT, write_checkpoint

from puffer_core.errors import APIUsageError
from puffer_core.train.saved_data import Shape, check_plain, short

SMALL = Shape(max_nodes=100, max_depth=4, max_text=16)


def laughs(levels: int) -> list:
    """A list holding the same list twice, that one the same list twice, … ``levels`` deep."""
    item: list = ["lol"]
    for _ in range(levels):
        item = [item, item]
    return item


def tree_size(value, cap: int) -> int:
    """Items ``value`` has as a tree (what repr or json visit), counted up to ``cap``."""
    count, stack = 0, [value]
    while stack and count < cap:
        item = stack.pop()
        count += 1
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return count


@pytest.mark.parametrize(
    "value",
    [None, 1, 2.5, "short", [1, [2, [3]]], {"a": (1, 2), 3: [None, True]}, [(), (), {}, {}], {"keys": ["x"] * 90}],
)
def test_plain_trees_within_the_shape_pass(value):
    check_plain(value, "kwargs", SMALL)


def self_containing() -> list:
    loop: list = [1]
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (laughs(60), "holds the same list more than once"),
        (self_containing(), "holds the same list more than once"),
        (list(range(101)), "holds more than 100 values"),
        ([[[[[1]]]]], "nests deeper than 4 levels"),
        ("x" * 17, "holds a string of 17 characters (at most 16)"),
        (2**100, "holds an int of 101 bits (at most 64)"),
        ({"k": b"bytes"}, "holds a bytes, not plain data"),
        ({"k": {1, 2}}, "holds a set, not plain data"),
        ({(1, 2): 3}, "has a key (1, 2) that is not a short string or an int"),
    ],
)
def test_what_is_not_a_small_plain_tree_is_refused_naming_the_field(value, fragment):
    with pytest.raises(APIUsageError) as caught:
        check_plain(value, "run/policy.pt: env_kwargs", SMALL)
    assert str(caught.value).startswith("run/policy.pt: env_kwargs ") and fragment in str(caught.value)


def test_short_prints_any_plain_data_in_a_short_line():
    assert short("\x1b]0;title\x07") == "'\\x1b]0;title\\x07'"
    assert len(short("x" * 10**6)) < 80 and len(short(list(range(10**6)))) < 80
    assert len(short(laughs(60))) < 80  # the shared references are never expanded


torch = require("torch")
require("matplotlib")


def test_a_memo_bomb_in_the_env_kwargs_is_refused_in_bounded_time_and_memory(tmp_path):
    bomb = tmp_path / "bomb"
    path = write_checkpoint(bomb, env_kwargs={"number": laughs(60)})
    # The attack: a file of a few KB whose kwargs are 2**60 items to print (repr hung on them).
    assert path.stat().st_size < 64 * 1024
    loaded = torch.load(path, weights_only=True)["env_kwargs"]
    assert tree_size(loaded, cap=10**6) == 10**6
    # The fix: refused by `puffer eval`, in one line, at no memory cost.
    from puffer_core import train

    with pytest.raises(APIUsageError, match=r"env_kwargs holds the same list more than once"):
        train.load(path)
    eval_cmd = ["-m", "puffer_core.cli.main", "eval"]
    legit = run_measured([*eval_cmd, str(OLD_CHECKPOINT), "--episodes", "1"], puffer_env(None))
    refused = run_measured([*eval_cmd, str(bomb)], puffer_env(None), max_memory=4 * 2**30)
    assert legit.returncode == 0, legit.stderr
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "env_kwargs holds the same list more than once" in refused.stderr
    assert refused.peak_rss < legit.peak_rss + 64 * 2**20, (refused.peak_rss, legit.peak_rss)


@pytest.mark.parametrize(
    "change",
    [
        # Twenty levels: a million items, refused as sixty would be, and harmless where not.
        {"config": {"hidden_size": laughs(20)}},  # its error message would print it
        {"curve": {"rows": [{"policy_loss": laughs(20)}], "episodes": []}},  # curve.csv would print it
        {"extra": {"note": laughs(20)}},
        {"spaces": {"observation": laughs(20), "action": "Discrete(1)"}},
    ],
)
def test_every_field_printed_or_written_later_is_checked_too(tmp_path, change):
    from puffer_core import train

    with pytest.raises(APIUsageError, match=r"holds the same list more than once|nests deeper than"):
        train.load(write_checkpoint(tmp_path, **change))


def test_an_env_id_read_from_a_file_never_reaches_the_terminal_raw_nor_an_install_hint(tmp_path):
    escape = "\x1b]0;owned\x07\x1b[2Jclassic/probe_1"
    write_checkpoint(tmp_path / "escape", env=escape)
    write_checkpoint(tmp_path / "spaced", env="classic/probe 1")
    write_checkpoint(tmp_path / "squatted", env="cartpole-pro/cartpole")
    cases = [("eval", str(tmp_path / name)) for name in ("escape", "spaced", "squatted")]
    cases.append(("train", "--resume", str(tmp_path / "squatted"), "--steps", "4096"))
    escaped, spaced, squatted, resumed = run_puffer_many(cases, puffer_env(None), preload=("torch",))
    for proc in (escaped, spaced, squatted, resumed):
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr and "pip install" not in proc.stderr
    assert "its env '\\x1b]0;owned\\x07\\x1b[2Jclassic/probe_1' is not an env id" in escaped.stderr
    assert "the run was trained on 'classic/probe 1', which is not an env id" in spaced.stderr
    for proc in (squatted, resumed):
        assert "unknown environment 'cartpole-pro/cartpole'. No plugin named 'cartpole-pro' is installed." in (
            proc.stderr
        )
