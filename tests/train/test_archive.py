"""`puffer_core.train.archive` and the tensor accounting of `checkpoint.load`: a small checkpoint
never costs large memory. A zip bomb (a deflated 1 GiB zero tensor in ``extra``, 1 MB on disk)
is refused before torch reads it; stored tensors outside the policy's declared weights are
refused before any is read (they stay mapped in the file)."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest
from optional import require
from plugin_site import puffer_env
from process_checks import run_measured
from stored_run import OLD_CHECKPOINT, write_checkpoint

from puffer_core.errors import APIUsageError

require("torch")
require("matplotlib")
import torch  # noqa: E402

from puffer_core import train  # noqa: E402
from puffer_core.train import archive as archives  # noqa: E402

GIB = 2**30


def deflate(path: Path) -> None:
    """Rewrite the zip at ``path`` with its entries deflated (streamed: never whole in memory)."""
    packed = path.with_name("deflated.zip")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            with source.open(entry) as reader, target.open(entry.filename, "w", force_zip64=True) as writer:
                shutil.copyfileobj(reader, writer, 2**24)
    os.replace(packed, path)


@pytest.fixture(scope="module")
def zip_bomb(tmp_path_factory):
    """A checkpoint of about 1 MB on disk whose ``extra`` holds a 1 GiB zero tensor, deflated."""
    directory = tmp_path_factory.mktemp("bomb") / "run"
    path = write_checkpoint(directory, extra={"blob": torch.zeros(GIB // 4)})
    deflate(path)
    return directory


def python(*code_lines: str) -> list[str]:
    return ["-c", "\n".join(code_lines)]


def test_torch_save_stores_its_entries_uncompressed(tmp_path):
    path = write_checkpoint(tmp_path)
    entries = zipfile.ZipFile(path).infolist()
    assert {entry.compress_type for entry in entries} == {zipfile.ZIP_STORED}
    assert archives.check_archive(path).tensor_bytes == sum(e.file_size for e in entries if "/data/" in e.filename)


def test_the_zip_bomb_takes_a_gigabyte_of_torch_load_but_is_refused_unread(zip_bomb):
    path = zip_bomb / "policy.pt"
    assert path.stat().st_size < 2 * 2**20  # about 1 MB on disk ...
    assert sum(entry.file_size for entry in zipfile.ZipFile(path).infolist()) > GIB  # ... 1 GiB unpacked
    # The attack: what loading it did before (torch.load, weights_only) inflates the tensor.
    load = python("import sys, torch", "torch.load(sys.argv[1], weights_only=True)")
    attack = run_measured([*load, str(path)], max_memory=8 * GIB)
    assert attack.returncode == 0, attack.stderr
    assert attack.peak_rss > GIB
    # The fix: `puffer eval` refuses it in one line, having read only the zip's directory.
    legit = run_measured(["-m", "puffer_core.cli.main", "eval", str(OLD_CHECKPOINT), "--episodes", "1"])
    assert legit.returncode == 0, legit.stderr
    refused = run_measured(["-m", "puffer_core.cli.main", "eval", str(zip_bomb)], puffer_env(None), 4 * GIB)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"bytes that would expand to {GIB:,})" in refused.stderr and "a zip bomb" in refused.stderr
    assert refused.peak_rss < legit.peak_rss + 64 * 2**20, (refused.peak_rss, legit.peak_rss)
    with pytest.raises(APIUsageError, match="has a compressed entry"):
        train.evaluate(zip_bomb, episodes=1)


def test_stored_tensors_beyond_the_policys_are_refused_without_reading_them(tmp_path):
    """The same zeros stored (256 MiB on disk): refused in ``extra`` as not plain data, and as
    bytes the policy's weights do not account for, with the tensor never read."""
    blob = torch.zeros(2**26)
    in_extra = write_checkpoint(tmp_path / "extra", extra={"blob": blob})
    in_optimizer = torch.load(OLD_CHECKPOINT, weights_only=True)["optimizer"]
    in_optimizer["state"][0]["junk"] = blob
    beside = write_checkpoint(tmp_path / "optimizer", optimizer=in_optimizer)
    del blob
    with pytest.raises(APIUsageError, match=r"extra holds a Tensor, not plain data"):
        train.load(in_extra)
    with pytest.raises(APIUsageError, match=r"the optimizer holds a tensor of shape \(67108864,\), which no weight"):
        train.load(beside)
    load = python(
        "import sys",
        "from puffer_core.train import checkpoint",
        "try:",
        "    checkpoint.load(sys.argv[1])",
        "except Exception as exc:",
        "    print(type(exc).__name__)",
    )
    legit = run_measured([*load, str(OLD_CHECKPOINT)])
    refused = run_measured([*load, str(in_extra)], max_memory=4 * GIB)
    assert legit.stdout == "" and refused.stdout.split() == ["APIUsageError"], (legit, refused)
    assert refused.peak_rss < legit.peak_rss + 32 * 2**20, (refused.peak_rss, legit.peak_rss)  # not the 256 MiB


def test_a_shape_that_matches_is_still_weighed_against_the_file(tmp_path):
    data = torch.load(OLD_CHECKPOINT, weights_only=True)
    weight = data["policy"]["actor.bias"]
    # A weight of the right shape that views a storage of 64 MiB: the file holds far more than
    # the policy's shapes account for.
    big = torch.zeros(2**24)
    data["policy"]["actor.bias"] = big[: weight.numel()]
    path = tmp_path / "policy.pt"
    torch.save(data, path)
    with pytest.raises(APIUsageError, match=r"holds [\d,]+ bytes of tensors where its policy's weights account for"):
        train.load(path)


def _rezip(path: Path, entries) -> None:
    """Rewrite the zip at ``path``, stored, with ``entries(name -> bytes)`` of its own."""
    with zipfile.ZipFile(path) as source:
        held = {entry.filename: source.read(entry) for entry in source.infolist()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as target:
        for name, data in entries(held).items():
            target.writestr(name, data)


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        (lambda held: {**held, "archive/version": b"3" * 10_000}, "where torch writes a note"),
        (lambda held: {**held, "second/data.pkl": held["policy/data.pkl"]}, "holds 2 pickles (data.pkl), not one"),
        (lambda held: {**held, "archive/byteorder": b"big"}, "was not written in this machine's byte order"),
    ],
)
def test_what_the_zip_holds_is_checked(tmp_path, entries, fragment):
    path = write_checkpoint(tmp_path)
    _rezip(path, entries)
    with pytest.raises(APIUsageError) as caught:
        train.load(path)
    assert fragment in str(caught.value) and str(path) in str(caught.value)


def test_a_file_that_is_not_a_zip_is_refused(tmp_path):
    path = tmp_path / "policy.pt"
    path.write_bytes(b"\x80\x04K\x01.")  # a pickle of 1, the format before torch 1.6
    with pytest.raises(APIUsageError, match=r"is not a zip archive, the format torch\.save writes"):
        train.load(path)
