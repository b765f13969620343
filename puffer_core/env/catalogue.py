"""The environment catalogue: docs/envs/<plugin>.md, one page per plugin, generated from the envs themselves.

``python -m puffer_core.env.catalogue [--check] [--plugins a,b]`` makes every env of every
installed plugin and writes, per env, its id, description, observation and action spaces
(as the env declares them and as puffer_core flattens them), its kwargs with their types and
defaults (``puffer_core.specs.kwarg_types``, what ``--kwarg`` parses by), how to install it, and
one rendered frame per family (PNG under docs/assets/envs/; a text env's frame as text).
An env that cannot be made here is listed from its declaration (DeepMind Lab: in PufferTank).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import struct
import sys
import warnings
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from puffer_core.env.environments import make_from_spec, missing_requirements
from puffer_core.plugins import PluginSet, get_plugins
from puffer_core.plugins.manager import PUBLISHED_PLUGINS, _plugin_install
from puffer_core.specs.declarations import EnvSpec
from puffer_core.specs.kwarg_types import NO_DEFAULT, env_kwarg_types

__all__ = ["GENERATOR", "EnvEntry", "catalogue_pages", "entries", "frame_file", "main", "page_text", "write_png"]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = DOCS / "envs"
FRAMES = DOCS / "assets" / "envs"
GENERATOR = "python -m puffer_core.env.catalogue"
#: A plugin with more envs than this gets one frame, of its representative: its levels look alike.
MAX_FRAMES = 30
ANSI_CODE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: The env a plugin's single frame shows (else its first).
REPRESENTATIVE = {"atari": "atari/breakout", "nethack": "nethack/score"}


@dataclass
class EnvEntry:
    """What the catalogue says about one env."""

    spec: EnvSpec
    plugin: str
    observation: str = ""
    action: str = ""
    flat_observation: str = ""
    flat_action: str = ""
    agents: int = 1
    unavailable: str = ""
    frame: str = ""  # the PNG's name under docs/assets/envs/, when one was rendered
    text_frame: str = ""
    notes: list[str] = field(default_factory=list)


def frame_file(env_id: str) -> str:
    """The PNG name of ``env_id``'s frame: ``atari-breakout.png``."""
    return env_id.replace("/", "-") + ".png"


def write_png(path: Path, rgb: np.ndarray) -> None:
    """An (H, W, 3) uint8 array as a PNG (zlib only: no imaging library needed)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    height, width = rgb.shape[:2]
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)


def _quiet() -> contextlib.ExitStack:
    """Envs' banners and warnings kept off the generator's output; pygame without a display or sound."""
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    return stack


def _flat(space: Any) -> str:
    shape = "(" + ", ".join(map(str, space.shape)) + ("," if len(space.shape) == 1 else "") + ")"
    return f"{shape} {np.dtype(space.dtype).name}"


def _structured(emulator: Any) -> tuple[str, str]:
    if hasattr(emulator, "obs_layouts"):  # several agents: the first slot's (all share one layout)
        return str(emulator.obs_layouts[0].original_space), str(emulator.action_layouts[0].original_space)
    return str(emulator.obs_layout.original_space), str(emulator.action_layout.original_space)


def _describe(entry: EnvEntry, emulator: Any) -> None:
    entry.observation, entry.action = _structured(emulator)
    entry.flat_observation = _flat(emulator.single_observation_space)
    entry.flat_action = f"{emulator.single_action_space} ({np.dtype(emulator.single_action_space.dtype).name})"
    entry.agents = int(getattr(emulator, "num_agents", 1))


def _render(spec: EnvSpec, mode: str) -> Any:
    """One frame of ``spec``'s env in ``mode`` after a seeded reset, or None where it does not render so."""
    kwargs = dict(spec.render_kwargs.get(mode, {"render_mode": mode}))
    try:
        with _quiet():
            env = make_from_spec(spec, **kwargs)
            try:
                env.reset(seed=0)
                return env.render()
            finally:
                env.close()
    except Exception:  # the env does not take the mode: it has no frame of that kind
        return None


def _entry(spec: EnvSpec, plugin: str, framed: bool, frames: Path | None) -> EnvEntry:
    entry = EnvEntry(spec, plugin)
    missing = missing_requirements(spec)
    if missing:
        entry.unavailable = f"needs {', '.join(missing)}"
        return entry
    try:
        with _quiet():
            emulator = make_from_spec(spec)
            try:
                _describe(entry, emulator)
            finally:
                emulator.close()
    except Exception as exc:
        entry.unavailable = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return entry
    if framed:
        frame = _render(spec, "rgb_array")
        if isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[2] == 3:
            entry.frame = frame_file(spec.id)
            if frames is not None:
                write_png(frames / entry.frame, frame)
        else:
            text = _render(spec, "ansi")
            if isinstance(text, str) and text.strip():
                entry.text_frame = _plain_frame(text)
    return entry


def _plain_frame(text: str) -> str:
    """A text frame without its colour codes, blank runs squeezed, its top line left out: a
    terminal game's message line can depend on the day it was made (NetHack's moon phase)."""
    lines = [line.rstrip() for line in ANSI_CODE.sub("", text).splitlines()[1:]]
    kept = [line for index, line in enumerate(lines) if line or (index and lines[index - 1])]
    return "\n".join(kept).strip("\n")


def _framed(plugin: str, specs: list[EnvSpec]) -> set[str]:
    """The ids whose frame the page shows: every env's, or one representative's for a big family."""
    ids = [spec.id for spec in specs]
    if len(ids) <= MAX_FRAMES and plugin not in REPRESENTATIVE:
        return set(ids)
    chosen = REPRESENTATIVE.get(plugin)
    return {chosen if chosen in ids else ids[0]}


def entries(plugins: PluginSet, plugin: str, frames: Path | None = None) -> list[EnvEntry]:
    """Every env of ``plugin``, made once (and once more in a render mode where it gets a frame)."""
    specs = [plugins.env_specs[env_id] for env_id in plugins.env_ids() if plugins.env_owner[env_id] == plugin]
    framed = _framed(plugin, specs)
    return [_entry(spec, plugin, spec.id in framed, frames) for spec in specs]


def _install(plugin: str, rows: list[EnvEntry]) -> list[str]:
    lines = ["## Install", ""]
    if plugin in PUBLISHED_PLUGINS:
        lines.append(f"The plugin: {_plugin_install(plugin)}.")
    else:
        lines.append("Built into puffer-core: nothing to install.")
    hints: dict[str, list[str]] = {}
    for entry in rows:
        if entry.spec.requires:
            need = ", ".join(f"`{r}`" for r in entry.spec.requires)
            hint = entry.spec.install_hint or "pip install " + " ".join(entry.spec.requires)
            hints.setdefault(f"need {need}: {hint}", []).append(entry.spec.id)
    for hint, ids in hints.items():
        which = "Its envs" if len(ids) == len(rows) else ", ".join(f"`{i}`" for i in ids) + ":"
        lines += ["", f"{which} {hint}"]
    return [*lines, ""]


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def _kwargs_table(spec: EnvSpec) -> list[str]:
    kinds = env_kwarg_types(spec)
    if not kinds:
        return ["Kwargs: none declared.", ""]
    lines = ["| kwarg | type | default |", "| --- | --- | --- |"]
    for name, kind in sorted(kinds.items()):
        default = "—" if kind.default is NO_DEFAULT else _code(repr(kind.default))
        # "or", not "|": a pipe would end the table's cell, also inside a code span on some renderers.
        lines.append(f"| `{name}` | {_code(kind.label.replace(' | ', ' or '))} | {default} |")
    return [*lines, ""]


def _env_section(entry: EnvEntry) -> list[str]:
    spec = entry.spec
    lines = [f"## `{spec.id}`", "", spec.description or "(no description)", ""]
    lines += [f"API: `{spec.api}`." + (f" Default kwargs: {_code(repr(dict(spec.kwargs)))}." if spec.kwargs else "")]
    lines.append("")
    if entry.frame:
        lines += [f"![{spec.id}, after a reset](../assets/envs/{entry.frame})", ""]
    if entry.text_frame:
        lines += ["A frame (its text rendering, after a reset):", "", "```text", entry.text_frame, "```", ""]
    if entry.unavailable:
        made_where = "in PufferTank" if entry.plugin == "dmlab" else "where it can be made"
        lines += [f"Spaces: {made_where} (not made here: {entry.unavailable}).", ""]
    else:
        slots = f" per agent slot, {entry.agents} slots" if entry.agents > 1 else ""
        lines += [
            "| | as the env declares it | flat (puffer_core) |",
            "| --- | --- | --- |",
            f"| observation | {_code(entry.observation)} | {_code(entry.flat_observation)}{slots} |",
            f"| action | {_code(entry.action)} | {_code(entry.flat_action)} |",
            "",
        ]
    return lines + _kwargs_table(spec)


def page_text(plugin: str, rows: list[EnvEntry]) -> str:
    """The Markdown of ``plugin``'s page, its first line saying what generates it."""
    count = f"{len(rows)} environment{'s' * (len(rows) != 1)}"
    lines = [
        f"<!-- generated by {GENERATOR}: do not edit -->",
        "",
        f"# {plugin} environments",
        "",
        f"{count}. Each is made with `puffer_core.make(ID, **kwargs)`, `vector.make(ID, ...)` or "
        "`puffer run ID --kwarg KEY=VALUE`; the kwargs' types are what `--kwarg` parses VALUE by. "
        "The flat spaces are what the vector envs' buffers hold.",
        "",
        *_install(plugin, rows),
    ]
    for entry in rows:
        lines += _env_section(entry)
    return "\n".join(lines).rstrip("\n") + "\n"


def catalogue_pages(
    plugins: PluginSet, only: Iterable[str] | None = None, frames: Path | None = None
) -> dict[str, str]:
    """``{plugin: page text}`` for every plugin with envs (those of ``only``, when given)."""
    owners = dict.fromkeys(plugins.env_owner[env_id] for env_id in plugins.env_ids())
    chosen = [plugin for plugin in owners if only is None or plugin in set(only)]
    return {plugin: page_text(plugin, entries(plugins, plugin, frames)) for plugin in chosen}


def main(argv: list[str] | None = None) -> int:
    """Write docs/envs/<plugin>.md and their frames, or with --check say which pages are stale."""
    parser = argparse.ArgumentParser(prog=GENERATOR, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Compare with the pages on disk; write nothing.")
    parser.add_argument("--plugins", help="Only these plugins (comma list).")
    args = parser.parse_args(argv)
    only = args.plugins.split(",") if args.plugins else None
    if not args.check:
        FRAMES.mkdir(parents=True, exist_ok=True)
        PAGES.mkdir(parents=True, exist_ok=True)
    pages = catalogue_pages(get_plugins(), only, None if args.check else FRAMES)
    stale = []
    for plugin, text in pages.items():
        path = PAGES / f"{plugin}.md"
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
            continue
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"stale: {', '.join(stale)}; run {GENERATOR}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
