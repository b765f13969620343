"""Recording and watching env 0: its own ``render()`` frames, as a video, an asciinema cast
or redrawn on the terminal.

A ``Recording`` says what to record and how the env renders; ``plan_recording`` (a file)
and ``plan_watch`` (the terminal) check both in the main process, so a bad suffix, an
unwritable path or an env that cannot render fails at once with one line. The vector
backends then wrap env 0's emulator in a ``Recorder`` inside the process that steps it
(a worker for Multiprocessing and Ray), so no frame crosses processes and no other env
pays anything. Pixel frames (``render_mode="rgb_array"``) go to an MP4 through imageio or
to a GIF through Pillow, written as they come: a recording of any length holds a frame or
two. Text frames (``render_mode="ansi"``) go to an asciinema v2 ``.cast`` file or the
terminal. Files are written under a temporary name and renamed when the recording ends,
so a crash never leaves a half-written file under the name asked for; without ``overwrite``
the rename never replaces a file that took the name during the run (``publish_new``).
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from puffer_core.atomic import (
    make_temporary,
    private_directory,
    publish_new,
    remove_stale_temporaries,
    replace_durably,
    temporary_beside,
)
from puffer_core.env_factory import EnvFactory
from puffer_core.errors import APIUsageError, MissingDependencyError, PufferError
from puffer_core.limits import MAX_EPISODES, MAX_FPS, check_int, check_number
from puffer_core.plugins import get_plugins

__all__ = [
    "FORMATS",
    "Recorder",
    "Recording",
    "open_sink",
    "plan_recording",
    "plan_watch",
]

#: Render mode each file suffix records.
FORMATS: dict[str, str] = {".mp4": "rgb_array", ".gif": "rgb_array", ".cast": "ansi"}
#: Frames per second when neither the plugin nor the env says.
DEFAULT_FPS = 30.0
RECORD_INSTALL = "pip install 'puffer-core[record]'"
_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen: each text frame replaces the last
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PARTIAL = "partial"  # the tag of a recording's temporary file (puffer_core.atomic)
#: Past this many frames a GIF recording says once that .mp4 suits a run this long.
GIF_NOTE_FRAMES = 1_000


@dataclass(frozen=True)
class Recording:
    """What env 0 records: ``path`` (None: the terminal), the render ``mode``, the creator
    kwargs that make the env render that way, frames per second, how many episodes
    (None: every one until the vector env closes), and whether the file may replace one."""

    path: str | None
    mode: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    fps: float = DEFAULT_FPS
    episodes: int | None = None
    overwrite: bool = False

    @property
    def watch(self) -> bool:
        return self.path is None

    def wrap(self, env: Any) -> Recorder:
        """``env`` (env 0's emulator) recording to this recording's file or terminal."""
        return Recorder(env, self)


def plan_recording(
    env: Any,
    path: str | os.PathLike,
    env_kwargs: Mapping[str, Any] | None = None,
    episodes: int | None = None,
    overwrite: bool = False,
) -> Recording:
    """A checked ``Recording`` of ``env`` (an env id or creator) into ``path``: MP4/GIF for
    pixel envs, asciinema ``.cast`` for text envs.

    Args:
        env: an env id or a creator.
        path: the file to write; its suffix picks the format.
        env_kwargs: the creator's kwargs.
        episodes: how many episodes to record (None: every one until the vector env closes).
        overwrite: replace ``path`` if it exists (refused otherwise).

    Raises:
        APIUsageError: one line naming what is wrong (suffix, directory, an existing file,
            an env that cannot render that way).
        MissingDependencyError: imageio is missing for a video.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise APIUsageError(
            f"cannot record to {str(path)!r}: unknown suffix {suffix or '(none)'!r}; "
            "use .mp4 or .gif (pixel envs) or .cast (text envs, asciinema)"
        )
    _check_writable(target, overwrite)
    mode = FORMATS[suffix]
    if mode == "rgb_array":
        _require_imageio(suffix)
    return replace(_plan(env, str(target), mode, env_kwargs, episodes, f"record to {suffix}"), overwrite=overwrite)


def plan_watch(env: Any, env_kwargs: Mapping[str, Any] | None = None, fps: float | None = None) -> Recording:
    """A checked ``Recording`` that redraws env 0's text frames on this terminal."""
    recording = _plan(env, None, "ansi", env_kwargs, None, "be watched in the terminal")
    if fps is not None:
        recording = Recording(None, recording.mode, recording.env_kwargs, _check_fps(fps), None)
    return recording


def _plan(
    env: Any, path: str | None, mode: str, env_kwargs: Mapping[str, Any] | None, episodes: int | None, what: str
) -> Recording:
    if episodes is not None:
        check_int("episodes to record", episodes, 1, MAX_EPISODES)
    render_kwargs, plugin_fps = _render_settings(env, mode)
    env_fps = _check_renders(env, mode, render_kwargs, dict(env_kwargs or {}), what)
    return Recording(path, mode, render_kwargs, _check_fps(plugin_fps or env_fps or DEFAULT_FPS), episodes)


def _render_settings(env: Any, mode: str) -> tuple[dict[str, Any], float | None]:
    """The creator kwargs that turn ``mode`` on and the plugin's frames per second."""
    if isinstance(env, str):
        spec = get_plugins().get_spec(env)
        return dict(spec.render_kwargs.get(mode, {"render_mode": mode})), spec.render_fps
    return {"render_mode": mode}, None


def _check_renders(
    env: Any, mode: str, render_kwargs: dict[str, Any], env_kwargs: dict[str, Any], what: str
) -> float | None:
    """Build the env once as env 0 will be, reset it and render one frame of the right kind;
    returns the env's ``metadata["render_fps"]``."""

    # pygame (classic control, butterfly) opens a sound device and a display at init; an
    # rgb_array recording needs neither, and workers inherit these, so no ALSA or
    # XDG_RUNTIME_DIR complaints reach the terminal.
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    name = env if isinstance(env, str) else getattr(env, "__name__", "the env")
    try:
        with warnings.catch_warnings():  # gymnasium warns of a mode outside render_modes: we say it better
            warnings.simplefilter("ignore")
            emulator = EnvFactory(env, {**env_kwargs, **render_kwargs})()
    except Exception as exc:  # the env refuses the mode (TypeError, ValueError, gymnasium.error.Error, …)
        if isinstance(exc, PufferError) and not isinstance(exc, APIUsageError):
            raise  # a missing package, an unknown id: said well already
        works = _what_works(_render_modes(EnvFactory(env, env_kwargs)))
        raise APIUsageError(
            f"{name} cannot {what}: made with {_kwargs_text(render_kwargs)} it says {exc}; {works}"
        ) from exc
    try:
        metadata = getattr(emulator, "metadata", None) or {}
        modes = list(metadata.get("render_modes", []))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            emulator.reset(seed=0)
            frame = emulator.render()
    finally:
        emulator.close()
    if not _frame_fits(frame, mode):
        raise APIUsageError(
            f"{name} cannot {what}: render_mode={mode!r} gave {_describe(frame)}"
            f" (its render modes: {', '.join(modes) or 'none'}); {_what_works(modes)}"
        )
    return metadata.get("render_fps")


def _render_modes(factory: Any) -> list[str]:
    """The render modes the env's metadata lists (built once without render kwargs)."""
    emulator = factory()
    try:
        return list((getattr(emulator, "metadata", None) or {}).get("render_modes", []))
    finally:
        emulator.close()


def _frame_fits(frame: Any, mode: str) -> bool:
    if mode == "ansi":
        return isinstance(frame, str) and bool(frame)
    return isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[2] in (3, 4) and frame.dtype == np.uint8


def _what_works(modes: list[str]) -> str:
    if "rgb_array" in modes:
        return "record it to .mp4 or .gif instead"
    if "ansi" in modes:
        return "record it to .cast or watch it with --watch instead"
    return "it has no render mode a recording can use (rgb_array or ansi)"


def _describe(frame: Any) -> str:
    if isinstance(frame, np.ndarray):
        return f"an array of shape {frame.shape} and dtype {frame.dtype}"
    return "None" if frame is None else f"a {type(frame).__name__}"


def _kwargs_text(kwargs: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in kwargs.items()) or "no kwargs"


def _check_fps(fps: Any) -> float:
    return check_number("frames per second", fps, 0, MAX_FPS, low_open=True)


def _check_writable(target: Path, overwrite: bool) -> None:
    if target.is_dir():
        raise APIUsageError(f"cannot record to {str(target)!r}: it is a directory; give a file name such as run.mp4")
    if target.exists() and not overwrite:
        raise APIUsageError(
            f"cannot record to {str(target)!r}: the file exists; pass --overwrite (overwrite=True) to replace it, "
            "or choose another path"
        )
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise APIUsageError(f"cannot record to {str(target)!r}: the directory {str(parent)!r} does not exist")
    # Try it: permission bits do not tell root (or a read-only mount, or /proc) the truth.
    try:
        with temporary_beside(target, "write-test"):
            pass
        if target.exists():
            target.open("a").close()
    except OSError as exc:
        raise APIUsageError(
            f"cannot record to {str(target)!r}: not writable here ({exc.strerror}); choose another path"
        ) from exc
    try:
        private_directory(parent, create=False)
    except APIUsageError as exc:
        raise APIUsageError(f"cannot record to {str(target)!r}: {exc}") from None


def _require_imageio(suffix: str) -> None:
    import importlib.util

    missing = [name for name in ("imageio", "imageio_ffmpeg") if importlib.util.find_spec(name) is None]
    if suffix == ".gif" and "imageio" not in missing:
        missing = []  # GIFs need only Pillow (imageio brings it), not ffmpeg
    if missing:
        raise MissingDependencyError(
            f"recording to {suffix} needs {', '.join(missing)}; install with: {RECORD_INSTALL}"
        )


# --------------------------------------------------------------------------- the recorder


class Recorder:
    """Env 0's emulator, sending a frame to ``sink`` after every reset and step.

    Everything else (attributes, ``call``, ``close``) reaches the emulator; the frames are
    the emulator's own ``render()``. Recording stops after ``recording.episodes`` episodes."""

    def __init__(self, env: Any, recording: Recording):
        self.env = env
        self.recording = recording
        self.sink = open_sink(recording)
        self.episodes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        out = self.env.reset(*args, **kwargs)
        self._frame()
        return out

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self._after_step()
        return out

    def step_in_place(self, action: Any) -> Any:
        out = self.env.step_in_place(action)
        self._after_step()
        return out

    def _after_step(self) -> None:
        self._frame()
        buf = self.env.buf
        # The episode is over when every live agent is done (one agent for single-agent envs).
        if self.sink is not None and bool(np.all(buf.terminals | buf.truncations | ~buf.masks)):
            self.episodes += 1
            if self.recording.episodes is not None and self.episodes >= self.recording.episodes:
                self._finish()

    def _frame(self) -> None:
        if self.sink is not None:
            self.sink.write(self.env.render())

    def _finish(self) -> None:
        sink, self.sink = self.sink, None
        if sink is not None:
            sink.close()

    def close(self) -> None:
        try:
            self._finish()
        finally:
            self.env.close()


# --------------------------------------------------------------------------- sinks


def open_sink(recording: Recording) -> Any:
    """The sink for ``recording``: video, cast or terminal."""
    if recording.watch:
        return TerminalSink(recording.fps)
    if recording.mode == "ansi":
        return CastSink(recording.path, recording.fps, overwrite=recording.overwrite)
    sink = GifSink if Path(recording.path).suffix.lower() == ".gif" else VideoSink
    return sink(recording.path, recording.fps, overwrite=recording.overwrite)


def _partial(path: str) -> Path:
    """Where a recording is written until it is complete: a new uniquely named file beside
    ``path`` (same suffix: the writer picks the format by it). Partial files of processes
    that died first (a restarted worker) go; names are matched exactly, never globbed."""
    remove_stale_temporaries(path, PARTIAL)
    return make_temporary(path, PARTIAL)


class _FileSink:
    """Frames into ``path`` through a hidden partial file, renamed when the recording ends (over
    a file of that name only with ``overwrite``); subclasses open the writer at the first frame
    (``_open``) and write each (``_write``)."""

    def __init__(self, path: str, fps: float, overwrite: bool = False):
        self.path, self.fps, self.overwrite = path, fps, overwrite
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
            return
        out, self.out = self.out, None
        out.close()
        if self.overwrite:
            replace_durably(self.partial, self.path)
            return
        kept = publish_new(self.partial, self.path)
        if kept != Path(self.path):
            # A note, not an error: the run (perhaps hours of training) stands, and the vector
            # env's close, which may call this one, reports nothing raised in it.
            print(
                f"note: {self.path} appeared during the recording and was left as it is; "
                f"the recording is {kept} (--overwrite, overwrite=True, replaces such a file)",
                file=sys.stderr,
                flush=True,
            )

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
    # Rows of height × (width · 3) bytes: numpy reduces a long contiguous axis fast, the
    # axis of 3 channels slowly (50 times slower at 400 × 600).
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
