"""puffer_core.tank.registry.pins: the file `puffer tank push --pins` writes, pull and build trust, read strictly."""

from __future__ import annotations

import json

import pytest

from puffer_core.tank.errors import TankError
from puffer_core.tank.registry.pins import LayerPin, Pins, read_pins, write_pins

REPO = "127.0.0.1:5000/puffertank"


def _sha(char: str) -> str:
    return "sha256:" + char * 64


def _pins() -> Pins:
    pins = Pins(REPO, "puffertank:latest", "c" * 64)
    for stage, char in (("base", "1"), ("envs", "2"), ("final", "3")):
        pins.layers[stage] = LayerPin(REPO, _sha(char), _sha(char.upper() if char.isalpha() else "a"), char * 64)
    return pins


def test_a_written_pins_file_reads_back_the_same(tmp_path):
    path = tmp_path / "pins.json"
    write_pins(path, _pins())
    data = json.loads(path.read_text())
    assert data["generated_by"] == "puffer tank push --pins" and data["format"] == 1
    assert data["layers"]["final"]["ref"] == f"{REPO}@{_sha('3')}"
    again = read_pins(path)
    assert again == _pins()
    assert again.by_inputs("2" * 64).digest == _sha("2")
    assert again.by_inputs("f" * 64) is None
    assert not list(tmp_path.glob(".pins.json.*"))  # written whole: no temporary left


def _write(tmp_path, data) -> str:
    path = tmp_path / "pins.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def _record(**changes) -> dict:
    record = _pins().record()
    for dotted, value in changes.items():
        target, *keys = record, *dotted.split("__")
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return record


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("not json", "not JSON"),
        ("[" * 60_000, "not JSON"),  # nested past the parser's recursion limit
        ("[]", "not a JSON object"),
        (_record(format=2), "format 2, this puffer-core reads format 1"),
        (_record(layers={}), "layers must name the final layer"),
        (_record(layers__extra={}), "only base, envs, final"),
        (_record(lock="abc"), "lock is 'abc'"),
        (_record(layers__final__digest="sha256:xyz"), "layers.final.digest is 'sha256:xyz'"),
        (_record(layers__final__ref=f"{REPO}:latest"), f"layers.final.ref '{REPO}:latest' is not REPOSITORY@"),
        (_record(layers__final__ref=f"{REPO}@{_sha('9')}"), "is not REPOSITORY@sha256:333"),
        (_record(layers__final__ref=f"--help@{_sha('3')}"), "starts with '-'"),
        (_record(layers__final__id=None), "layers.final.id is None"),
        (_record(layers__envs__inputs="nope"), "layers.envs.inputs is 'nope'"),
        ("{" + " " * 70_000 + "}", "larger than 64 KiB"),
    ],
    ids=lambda value: value[:24] if isinstance(value, str) else None,
)
def test_a_bad_pins_file_is_one_line_naming_it(tmp_path, data, says):
    path = _write(tmp_path, data)
    with pytest.raises(TankError) as caught:
        read_pins(path)
    message = str(caught.value)
    assert message.startswith(f"{path} is not a pins file: ") and says in message, message
    assert message.endswith("write one with puffer tank push --registry REG --pins FILE") and "\n" not in message


def test_a_missing_pins_file_says_so(tmp_path):
    with pytest.raises(TankError, match=r"cannot read the pins file .*: No such file or directory"):
        read_pins(tmp_path / "absent.json")
