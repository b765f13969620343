"""A run's settings as a TOML file: ``puffer train ENV --config run.toml``, and ``OUT/config.toml`` after.

The file takes the keys of ``--set`` (every PPO setting, docs/settings.md), optionally ``env``
(the env id, when the command line gives none) and a table ``[env_kwargs]`` of the env's
creator kwargs::

    env = "nethack/score"
    steps = 10_000_000
    num_envs = 64
    learning_rate = 0.0003

    [env_kwargs]
    max_episode_steps = 5000

``--set`` and ``--kwarg`` override what it says. An unknown key is refused with the closest
setting (``lr`` → ``learning_rate``), as ``--set`` is. Every run writes its complete settings
(every setting's value, defaults included) to ``OUT/config.toml``, so
``puffer train --config OUT/config.toml --out OTHER`` repeats it; ``puffer sweep`` writes its
best trial's as ``OUT/best.toml``. Torch-free.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from puffer_core.atomic import write_atomically
from puffer_core.errors import APIUsageError
from puffer_core.train.config import PPOConfig

__all__ = ["CONFIG_FILE", "ConfigFile", "read_config", "render_config", "write_config"]

CONFIG_FILE = "config.toml"
#: A config file larger than this is not one (they are a few kilobytes).
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class ConfigFile:
    """What a config file holds: PPO ``settings``, the ``env_kwargs`` and the ``env`` (None when it names none)."""

    settings: dict[str, Any]
    env_kwargs: dict[str, Any]
    env: str | None


def _toml(text: str, source: str) -> dict[str, Any]:
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10: tomli, a dependency there
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise APIUsageError(f"{source} is not TOML: {exc}") from None


def read_config(path: str | os.PathLike) -> ConfigFile:
    """The settings, env kwargs and env of the file at ``path``; one-line APIUsageError naming what is wrong."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        raise APIUsageError(f"cannot read the config file {source}: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise APIUsageError(f"{source} is larger than {MAX_BYTES:,} bytes: not a run's config file")
    try:
        data = _toml(raw.decode("utf-8"), source)
    except UnicodeDecodeError:
        raise APIUsageError(f"{source} is not UTF-8 text") from None
    env, env_kwargs = data.pop("env", None), data.pop("env_kwargs", {})
    if env is not None and not isinstance(env, str):
        raise APIUsageError(f'{source}: env must be an env id (a string such as "classic/cartpole"), got {env!r}')
    if not isinstance(env_kwargs, dict):
        raise APIUsageError(f"{source}: env_kwargs must be a table ([env_kwargs], a key per kwarg)")
    tables = sorted(key for key, value in data.items() if isinstance(value, dict))
    if tables:
        raise APIUsageError(f"{source}: [{tables[0]}] is not a table of a config file (only [env_kwargs] is)")
    try:
        PPOConfig().replace(**data).validate()  # an unknown key: the closest setting; a bad value: its range
    except APIUsageError as exc:
        raise APIUsageError(f"{source}: {exc}") from None
    return ConfigFile(settings=data, env_kwargs=env_kwargs, env=env)


def _value(value: Any) -> str | None:
    """``value`` in TOML (None when TOML cannot say it: a None, an infinity, an object)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, (list, tuple)):
        items = [_value(item) for item in value]
        return None if any(item is None for item in items) else f"[{', '.join(items)}]"  # type: ignore[arg-type]
    return None


def render_config(env: str | None, settings: Mapping[str, Any], env_kwargs: Mapping[str, Any], header: str) -> str:
    """The file's text: ``header`` (comment lines), ``env``, every setting, then ``[env_kwargs]``. A setting that
    is None (chosen at run time) or a kwarg TOML cannot hold stands as a comment."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    if env is not None:
        lines.append(f"env = {json.dumps(env)}")
    for key, value in settings.items():
        shown = _value(value)
        lines.append(f"{key} = {shown}" if shown is not None else f"# {key}: not set (chosen when the run starts)")
    if env_kwargs:
        lines += ["", "[env_kwargs]"]
        for key, value in env_kwargs.items():
            shown = _value(value)
            lines.append(f"{key} = {shown}" if shown is not None else f"# {key} = {value!r} (not expressible in TOML)")
    return "\n".join(lines) + "\n"


def write_config(
    path: str | os.PathLike,
    env: str | None,
    config: PPOConfig,
    env_kwargs: Mapping[str, Any],
    device: str | None = None,
) -> Path:
    """A run's complete settings at ``path`` (written whole): what ``puffer train --config`` repeats it from;
    ``device``, where it ran (a comment: the setting itself stays as asked, e.g. chosen when it starts)."""
    header = [
        "A puffer train run's complete settings, written by the run. Repeat it (--set and --kwarg override):",
        f"  puffer train --config {Path(path).name} --out NEW_FOLDER",
    ]
    if device is not None:
        header.append(f"It ran on {device}.")
    text = render_config(env, config.to_dict(), env_kwargs, "\n".join(header))
    write_atomically(path, text.encode("utf-8"))
    return Path(path)
