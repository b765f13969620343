"""Where a recording's frames go: an MP4 (imageio), a GIF written as frames come
(:mod:`puffer_core.env.gif`), an asciinema ``.cast`` file, or the terminal. A file sink writes
under a temporary name beside its target and publishes it whole when the recording ends,
without replacing a file that took the name meanwhile unless ``overwrite``."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from puffer_core.atomic import make_temporary, publish_new, remove_stale_temporaries, replace_durably, write_atomically
from puffer_core.env.gif import GifWriter, gif_frame_ms

__all__ = ["GIF_NOTE_FRAMES", "CastSink", "GifSink", "TerminalSink", "VideoSink", "text_size"]

PARTIAL = "partial"  # the tag of a recording's temporary file (puffer_core.atomic)
#: Past this many frames a GIF recording says once that .mp4 suits a run this long.
GIF_NOTE_FRAMES = 1_000
_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen: each text frame replaces the last
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _partial(path: str) -> Path:
    """Where a recording is written until it is complete: a new uniquely named file beside
    ``path`` (same suffix: the writer picks the format by it). Partial files of processes
    that died first (a restarted worker) go; names are matched exactly, never globbed."""
    remove_stale_temporaries(path, PARTIAL)
    return make_temporary(path, PARTIAL)


class _FileSink:
    """Frames into ``path`` through a hidden partial file, renamed when the recording ends (over
    a file of that name only with ``overwrite``); subclasses open the writer at the first frame
    (``_open``) and write each (``_write``). With a ``receipt`` (a file of the process that
    planned the recording), the name the recording got is written there when it ends (empty:
    not one frame came), so that process names the file actually written."""

    def __init__(self, path: str, fps: float, overwrite: bool = False, receipt: str | None = None):
        self.path, self.fps, self.overwrite, self.receipt = path, fps, overwrite, receipt
        self.partial = _partial(path)
        self.out: Any = None
        self.frames = 0

    def write(self, frame: Any) -> None:
        if self.out is None:
            self.out = self._open(frame)
        self._write(frame)
        self.frames += 1

    def close(self) -> None:
        if self.out is None:  # not one frame came: nothing to keep
            self.partial.unlink(missing_ok=True)
            self._receipt("")
            return
        out, self.out = self.out, None
        out.close()
        if self.overwrite:
            replace_durably(self.partial, self.path)
            self._receipt(self.path)
            return
        kept = publish_new(self.partial, self.path)
        self._receipt(str(kept))
        if kept != Path(self.path):
            # A note, not an error: the run (perhaps hours of training) stands, and the vector
            # env's close, which may call this one, reports nothing raised in it.
            print(
                f"note: {self.path} appeared during the recording and was left as it is; "
                f"the recording is {kept} (--overwrite, overwrite=True, replaces such a file)",
                file=sys.stderr,
                flush=True,
            )

    def _receipt(self, published: str) -> None:
        if self.receipt is None:
            return
        try:
            write_atomically(self.receipt, published.encode())
        except OSError:  # another machine's worker (Ray), or the planner gone: it names the planned path
            pass

    def _open(self, first: Any) -> Any:
        raise NotImplementedError

    def _write(self, frame: Any) -> None:
        raise NotImplementedError


class VideoSink(_FileSink):
    """RGB frames into an MP4 (ffmpeg, H.264) through imageio, streamed."""

    def _open(self, first: np.ndarray) -> Any:
        import imageio.v2 as imageio

        # macro_block_size=1 keeps the frame size; H.264 needs even sides, which _even pads.
        return imageio.get_writer(self.partial, fps=self.fps, macro_block_size=1, ffmpeg_log_level="error")

    def _write(self, frame: np.ndarray) -> None:
        self.out.append_data(_even(np.asarray(frame)[..., :3]))


class GifSink(_FileSink):
    """RGB frames into an animated GIF through ``GifWriter``, written as they come; past
    ``GIF_NOTE_FRAMES`` frames a one-line note on stderr points to .mp4."""

    def _open(self, first: np.ndarray) -> GifWriter:
        height, width = np.shape(first)[:2]
        return GifWriter(open(self.partial, "wb"), width, height, gif_frame_ms(self.fps) // 10)

    def _write(self, frame: np.ndarray) -> None:
        self.out.append(np.asarray(frame)[..., :3])
        if self.frames == GIF_NOTE_FRAMES:  # once: this is frame GIF_NOTE_FRAMES + 1
            seconds = GIF_NOTE_FRAMES / self.fps
            print(
                f"note: the GIF recording {self.path} is past {GIF_NOTE_FRAMES:,} frames ({seconds:,.0f} s); "
                "a GIF this long is large and slow to open: record long runs to .mp4",
                file=sys.stderr,
                flush=True,
            )


def _even(frame: np.ndarray) -> np.ndarray:
    """Pad an odd height or width by one black row/column (H.264's yuv420p needs even sides)."""
    h, w = frame.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return frame
    return np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)))


class CastSink(_FileSink):
    """Text frames into an asciinema v2 ``.cast``: a JSON header line, then one
    ``[seconds, "o", text]`` event per frame, each clearing the screen first."""

    def _open(self, first: str) -> Any:
        file = open(self.partial, "w", encoding="utf-8")
        width, height = text_size(first)
        header = {
            "version": 2,
            # At least a standard 80x24 terminal: later frames may be wider than the first.
            "width": max(width, 80),
            "height": max(height, 24),
            "timestamp": int(time.time()),
            "env": {"TERM": "xterm-256color"},
        }
        file.write(json.dumps(header) + "\n")
        return file

    def _write(self, frame: str) -> None:
        event = [round(self.frames / self.fps, 6), "o", _CLEAR + _crlf(frame)]
        self.out.write(json.dumps(event, ensure_ascii=False) + "\n")


def _crlf(text: str) -> str:
    """Line ends a terminal understands: CR returns to column 0, LF moves down."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def text_size(frame: str) -> tuple[int, int]:
    """(columns, rows) a text frame needs, colour codes not counted."""
    lines = _ANSI.sub("", frame).replace("\r", "").split("\n")
    return max((len(line) for line in lines), default=0), len(lines)


class TerminalSink:
    """Text frames redrawn in place on this process's stdout, at ``fps`` frames a second."""

    def __init__(self, fps: float):
        self.interval = 1.0 / fps
        self.next_at = 0.0
        self.out = sys.stdout
        self.started = False

    def write(self, frame: str) -> None:
        if not self.started:
            self.out.write("\x1b[?25l")  # hide the cursor while redrawing
            self.started = True
        wait = self.next_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.out.write(_CLEAR + _crlf(frame) + "\r\n")
        self.out.flush()
        self.next_at = time.monotonic() + self.interval

    def close(self) -> None:
        if self.started:
            self.out.write("\x1b[?25h")  # the cursor back
            self.out.flush()
            self.started = False
