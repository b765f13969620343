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

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from puffer_core.atomic import private_directory, temporary_beside
from puffer_core.env.environments import SpecCreator
from puffer_core.env.factory import EnvFactory
from puffer_core.env.sinks import CastSink, GifSink, TerminalSink, VideoSink
from puffer_core.errors import APIUsageError, MissingDependencyError, PufferError
from puffer_core.plugins import get_plugins
from puffer_core.specs.limits import MAX_EPISODES, MAX_FPS, check_int, check_number

__all__ = [
    "FORMATS",
    "Recorder",
    "Recording",
    "open_sink",
    "plan_recording",
    "plan_watch",
    "published",
    "receipted",
]

#: Render mode each file suffix records.
FORMATS: dict[str, str] = {".mp4": "rgb_array", ".gif": "rgb_array", ".cast": "ansi"}
#: Frames per second when neither the plugin nor the env says.
DEFAULT_FPS = 30.0
#: The record extra, from a checkout (puffer-core is on no index yet) or from the index once published.
RECORD_INSTALL = "pip install -e '.[record]' in the checkout (pip install 'puffer-core[record]' once published)"
#: Packages that envs render with and the extra that brings them (gymnasium's classic control: pygame).
RENDER_PACKAGES = {"pygame": "record"}


@dataclass(frozen=True)
class Recording:
    """What env 0 records: ``path`` (None: the terminal), the render ``mode``, the creator
    kwargs that make the env render that way, frames per second, how many episodes
    (None: every one until the vector env closes), whether the file may replace one, and
    where the name the file got is written when it ends (``receipted``)."""

    path: str | None
    mode: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    fps: float = DEFAULT_FPS
    episodes: int | None = None
    overwrite: bool = False
    receipt: str | None = None

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


@contextlib.contextmanager
def receipted(recording: Recording | None) -> Iterator[Recording | None]:
    """``recording`` with a receipt in a private temporary folder (removed on the way out),
    for ``published`` to read: the file is written where env 0 steps (a worker), and without
    ``overwrite`` it becomes ``NAME-2.SUFFIX`` when ``NAME`` appeared during the run."""
    if recording is None or recording.watch:
        yield recording
        return
    with tempfile.TemporaryDirectory(prefix="puffer-recording-") as folder:
        yield replace(recording, receipt=os.path.join(folder, "published"))


def published(recording: Recording | None) -> str | None:
    """The file a ``receipted`` recording wrote, once its vector env closed: its path, None when
    not one frame came; the planned path where the recorder could not say (another machine)."""
    if recording is None or recording.path is None:
        return None
    if recording.receipt is None:
        return recording.path
    try:
        with open(recording.receipt, encoding="utf-8") as receipt:
            return receipt.read() or None
    except OSError:
        return recording.path


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
    """The creator kwargs that turn ``mode`` on and the plugin's frames per second (a spec resolved by the
    caller, a ``SpecCreator``, is not looked up again)."""
    spec = env.spec if isinstance(env, SpecCreator) else get_plugins().get_spec(env) if isinstance(env, str) else None
    if spec is None:
        return {"render_mode": mode}, None
    return dict(spec.render_kwargs.get(mode, {"render_mode": mode})), spec.render_fps


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
            frame = _render_or_name_the_missing_package(emulator, name, what)
    finally:
        emulator.close()
    if not _frame_fits(frame, mode):
        raise APIUsageError(
            f"{name} cannot {what}: render_mode={mode!r} gave {_describe(frame)}"
            f" (its render modes: {', '.join(modes) or 'none'}); {_what_works(modes)}"
        )
    return metadata.get("render_fps")


def _render_or_name_the_missing_package(emulator: Any, name: str, what: str) -> Any:
    """The emulator's frame; a package its render() imports and lacks (gymnasium's classic
    control and pygame) is one line naming the package and what installs it."""
    try:
        return emulator.render()
    except Exception as exc:
        module = _missing_module(exc)
        if module is None:
            raise
        extra = RENDER_PACKAGES.get(module)
        fix = f"the {extra} extra: {RECORD_INSTALL}" if extra == "record" else f"pip install {module}"
        raise MissingDependencyError(
            f"{name} cannot {what}: it renders with {module}, which is not installed; install {fix}"
        ) from exc


def _missing_module(exc: BaseException | None) -> str | None:
    """The top-level module an import inside ``exc`` (or what caused it) could not find."""
    seen = 0
    while exc is not None and seen < 5:  # gymnasium's DependencyNotInstalled wraps the ImportError
        if isinstance(exc, ImportError) and exc.name:
            return exc.name.split(".")[0]
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


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
        return CastSink(recording.path, recording.fps, overwrite=recording.overwrite, receipt=recording.receipt)
    sink = GifSink if Path(recording.path).suffix.lower() == ".gif" else VideoSink
    return sink(recording.path, recording.fps, overwrite=recording.overwrite, receipt=recording.receipt)
