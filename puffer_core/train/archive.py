"""What a checkpoint file must be before torch reads any of it: a zip of stored entries of
bounded size.

``torch.save`` writes a zip archive whose entries are stored, not compressed, so that
``torch.load`` can map the tensors' bytes from the file instead of reading them. A compressed
entry is refused unread: a 1 MB file can deflate to gigabytes (a zip bomb). Stored entries
hold no more bytes than the file does, the pickle ``torch.load`` reads whole (``data.pkl``)
is bounded, and the tensors' bytes are weighed against the policy's declared shapes once the
pickle is read (:mod:`puffer_core.train.checkpoint`), before any tensor is touched.
"""

from __future__ import annotations

import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from puffer_core.errors import APIUsageError

__all__ = ["MAX_ENTRIES", "MAX_PICKLE_BYTES", "Archive", "check_archive"]

#: Entries of a checkpoint's zip: one per tensor (the policy's and the optimizer's), a few more.
MAX_ENTRIES = 100_000
#: The pickle of a checkpoint (settings, curve, kwargs; not the tensors), read into memory whole.
MAX_PICKLE_BYTES = 256 * 2**20
#: Any other entry that is not a tensor's (torch's version and byte-order notes: a few bytes).
MAX_NOTE_BYTES = 4096


@dataclass(frozen=True)
class Archive:
    """What the zip of a checkpoint holds: the pickle's size and the bytes of its tensors."""

    pickle_bytes: int
    tensor_bytes: int


def _refuse(path: Path, problem: str) -> APIUsageError:
    return APIUsageError(f"{path} {problem}: refused (give a policy.pt that `puffer train` wrote)")


def _entry_count(path: Path) -> int:
    """The entries the zip's end record declares, read before its directory is (a directory of
    millions of entries would cost more memory than the file has bytes)."""
    with open(path, "rb") as file:
        end = zipfile._EndRecData(file)  # the only reader of the end record; stable since Python 2
    if end is None:
        raise _refuse(path, "is not a zip archive, the format torch.save writes")
    return int(end[zipfile._ECD_ENTRIES_TOTAL])


def check_archive(path: str | Path) -> Archive:
    """Check ``path`` is a zip of stored entries no larger than the file, with one bounded pickle.

    Raises:
        APIUsageError: not a zip, a compressed or oversized entry, more than ``MAX_ENTRIES``
            entries, a pickle over ``MAX_PICKLE_BYTES``, or bytes of another byte order.
    """
    path = Path(path)
    if _entry_count(path) > MAX_ENTRIES:
        raise _refuse(path, f"holds more than {MAX_ENTRIES:,} entries")
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
            _check_entries(path, entries)
            pickles = [entry for entry in entries if entry.filename.endswith("/data.pkl")]
            if len(pickles) != 1:
                raise _refuse(path, f"holds {len(pickles)} pickles (data.pkl), not one")
            if pickles[0].file_size > MAX_PICKLE_BYTES:
                raise _refuse(path, f"has a pickle of {pickles[0].file_size:,} bytes (at most {MAX_PICKLE_BYTES:,})")
            _check_byte_order(path, archive, entries)
    except zipfile.BadZipFile as exc:
        raise _refuse(path, f"is not a readable zip archive ({exc})") from None
    tensors = sum(entry.file_size for entry in entries if "/data/" in entry.filename)
    return Archive(pickles[0].file_size, tensors)


def _check_entries(path: Path, entries: list[zipfile.ZipInfo]) -> None:
    packed = [e for e in entries if e.compress_type != zipfile.ZIP_STORED or e.file_size != e.compress_size]
    if packed:
        entry = max(packed, key=lambda e: e.file_size)  # the largest says most
        raise _refuse(
            path,
            f"has a compressed entry ({entry.filename[:80]!r}: {entry.compress_size:,} bytes that would expand to "
            f"{entry.file_size:,}); torch.save stores entries uncompressed, and a compressed one can expand to any "
            "size (a zip bomb)",
        )
    for entry in entries:
        note = "/data/" not in entry.filename and not entry.filename.endswith("/data.pkl")
        if note and entry.file_size > MAX_NOTE_BYTES:
            raise _refuse(
                path, f"has an entry {entry.filename[:80]!r} of {entry.file_size:,} bytes, where torch writes a note"
            )
    stored = sum(entry.file_size for entry in entries)
    if stored > os.path.getsize(path):
        raise _refuse(path, f"declares {stored:,} bytes of entries in a file of {os.path.getsize(path):,}")


def _check_byte_order(path: Path, archive: zipfile.ZipFile, entries: list[zipfile.ZipInfo]) -> None:
    """torch.load would swap the bytes of every tensor of a file of the other byte order, reading
    them all into memory: checkpoints are loaded only where their byte order is this machine's."""
    for entry in entries:
        if entry.filename.endswith("/byteorder"):
            if entry.file_size > 16 or archive.read(entry).decode("ascii", "replace") != sys.byteorder:
                raise _refuse(path, f"was not written in this machine's byte order ({sys.byteorder})")
