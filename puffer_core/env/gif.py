"""GIF files written frame by frame: each frame quantized by Pillow to a palette of its own,
only the box that changed since the frame before, a repeated frame shown longer; so a GIF of
any length holds a frame or two in memory (Pillow's own ``save_all`` wants every frame)."""

from __future__ import annotations

import io
import struct
from typing import BinaryIO

import numpy as np

__all__ = ["GifWriter", "gif_frame_ms"]


class GifWriter:
    """An animated GIF that loops forever, written to ``file`` frame by frame: each frame
    quantized to its own 256-colour palette (Pillow's GIF encoder, as its own save does), only
    the box that changed since the last frame stored, a frame equal to the last one shown
    longer instead. It holds the last frame and one encoded image, whatever the length
    (Pillow's save_all, and so imageio, keeps every frame until the end)."""

    def __init__(self, file: BinaryIO, width: int, height: int, delay: int):
        self.file, self.delay = file, delay  # delay: one frame's, in centiseconds
        self.last: np.ndarray | None = None
        self.pending, self.pending_delay = b"", 0  # the last image, written once its delay is known
        # The header, a logical screen without a global palette (each frame has its own,
        # 8 bits a channel), and the NETSCAPE2.0 extension: loop forever.
        file.write(b"GIF89a" + struct.pack("<HHBBB", width, height, 0x70, 0, 0))
        file.write(b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00")

    def append(self, rgb: np.ndarray) -> None:
        """Add one frame (height × width × 3, uint8)."""
        rgb = np.array(rgb, dtype=np.uint8)  # a copy: an env may draw every frame into one buffer
        box = _changed_box(self.last, rgb)
        if box is None and self.pending_delay + self.delay <= 0xFFFF:  # the delay field has 16 bits
            self.pending_delay += self.delay
            return
        top, bottom, left, right = box or (0, 1, 0, 1)
        self._flush()
        self.pending, self.pending_delay = _gif_image(rgb[top:bottom, left:right], left, top), self.delay
        self.last = rgb

    def close(self) -> None:
        """Write the last frame and the trailer, and close the file."""
        try:
            self._flush()
            self.file.write(b";")
        finally:
            self.file.close()

    def _flush(self) -> None:
        if self.pending:
            # Graphic control extension: disposal 1 (keep this image under the next, which
            # draws only what changed), the delay, no transparency.
            self.file.write(b"\x21\xf9\x04\x04" + struct.pack("<H", self.pending_delay) + b"\x00\x00")
            self.file.write(self.pending)
            self.pending = b""


def _changed_box(last: np.ndarray | None, rgb: np.ndarray) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) of the pixels where ``rgb`` differs from ``last`` (all of
    it when there is no last frame of its shape); None when nothing changed."""
    if last is None or last.shape != rgb.shape:
        return 0, rgb.shape[0], 0, rgb.shape[1]
    # Rows of height × (width · 3) bytes: numpy reduces a long contiguous axis fast, a
    # short axis of 3 channels slowly.
    changed = last.reshape(len(last), -1) != rgb.reshape(len(rgb), -1)
    rows = np.flatnonzero(changed.any(axis=1))
    if not rows.size:
        return None
    top, bottom = int(rows[0]), int(rows[-1]) + 1
    columns = np.flatnonzero(changed[top:bottom].any(axis=0))
    return top, bottom, int(columns[0]) // 3, int(columns[-1]) // 3 + 1


def _gif_image(rgb: np.ndarray, left: int, top: int) -> bytes:
    """``rgb`` as one GIF image at (left, top): descriptor, local palette and LZW data. Pillow
    writes it as a one-image GIF (quantizing it as its GIF save does); that file's global
    palette becomes the image's local one."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="GIF")
    data = buffer.getvalue()
    screen_flags = data[10]
    palette_end = 13 + _palette_size(screen_flags)
    start = _skip_extensions(data, palette_end)
    flags = data[start + 9]
    end = _skip_sub_blocks(data, start + 10 + _palette_size(flags) + 1)  # past the LZW code size
    head = b"," + struct.pack("<HH", left, top) + data[start + 5 : start + 9]  # placed at (left, top); its size
    if flags & 0x80:  # a local palette already
        return head + data[start + 9 : end]
    # The global palette made local, of its size; the interlace bit kept.
    return head + bytes([(flags & 0x40) | 0x80 | (screen_flags & 7)]) + data[13:palette_end] + data[start + 10 : end]


def _palette_size(flags: int) -> int:
    """The bytes of the colour table a logical screen's or an image's ``flags`` announce."""
    return 3 << ((flags & 7) + 1) if flags & 0x80 else 0


def _skip_extensions(data: bytes, position: int) -> int:
    """Where the image descriptor (``,``) starts, past any extensions (``!``) at ``position``."""
    while data[position] == 0x21:
        position = _skip_sub_blocks(data, position + 2)
    if data[position] != 0x2C:
        raise ValueError(f"Pillow wrote no GIF image where one was expected (byte {data[position]:#x})")
    return position


def _skip_sub_blocks(data: bytes, position: int) -> int:
    """Just past the data sub-blocks starting at ``position`` (each a length byte and its bytes,
    ending with a zero length)."""
    while data[position]:
        position += data[position] + 1
    return position + 1


def gif_frame_ms(fps: float) -> int:
    """A GIF frame's duration: GIFs count whole centiseconds, and viewers play anything
    under 20 ms as 100 ms, so 1/fps is rounded to 10 ms, at least 20."""
    return max(20, round(100 / fps) * 10)
