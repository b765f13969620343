"""The value types `puffer` options share, with their limits: a negative seed or a billion
envs is refused by click, on one line, before anything is built (or torch imported).

The limits are generous sanity bounds, not tuning advice: they catch typos (an extra
zero, a minus sign) that would otherwise start a run that never ends or fail deep inside.
"""

from __future__ import annotations

import json
from typing import Any

import click

from puffer_core.errors import APIUsageError
from puffer_core.specs.declarations import EnvSpec
from puffer_core.specs.limits import MAX_ENVS, MAX_EPISODES, MAX_SEED, MAX_STEPS, MAX_WORKERS, PLACEMENTS

__all__ = [
    "BATCH_SIZE",
    "EPISODES",
    "MAX_ENVS",
    "MAX_STEPS",
    "MAX_WORKERS",
    "NUM_ENVS",
    "NUM_WORKERS",
    "SEED",
    "STEPS",
    "Bounded",
    "parse_env_kwargs_option",
    "ray_options",
    "ray_vector_kwargs",
    "saved_kwargs_mode",
    "saved_kwargs_options",
]


class Bounded(click.ParamType):
    """An integer in [low, high]; out of range, the message says the range (``high`` may be
    shown as text, e.g. ``2**62 - 1``)."""

    name = "integer"

    def __init__(self, low: int, high: int, high_text: str | None = None):
        self.low, self.high = low, high
        self.high_text = high_text or f"{high:,}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = click.INT.convert(value, param, ctx)
        if not self.low <= number <= self.high:
            self.fail(f"{number} is out of range: give an integer from {self.low} to {self.high_text}", param, ctx)
        return number

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return f"INTEGER {self.low}..{self.high_text.replace(',', '').replace(' ', '')}"


SEED = Bounded(0, MAX_SEED, "2**62 - 1")
STEPS = Bounded(1, MAX_STEPS, "10**12")
NUM_ENVS = Bounded(1, MAX_ENVS)
NUM_WORKERS = Bounded(1, MAX_WORKERS)
BATCH_SIZE = Bounded(1, MAX_ENVS)
EPISODES = Bounded(1, MAX_EPISODES)


def pair_texts(values: tuple[str, ...], option: str) -> dict[str, str]:
    """KEY=VALUE pairs as ``{KEY: VALUE}``, VALUE still text."""
    out: dict[str, str] = {}
    for pair in values:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        out[key] = raw
    return out


def parse_pairs(values: tuple[str, ...], option: str) -> dict[str, Any]:
    """KEY=VALUE pairs, VALUE parsed as JSON when it is JSON (0.5, true, null, [1, 2]), else
    kept as the string (plain strings need no quotes)."""
    out: dict[str, Any] = {}
    for key, raw in pair_texts(values, option).items():
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def parse_env_kwargs_option(env: str | EnvSpec, values: tuple[str, ...]) -> dict[str, Any]:
    """``--kwarg KEY=VALUE`` pairs for ``env`` (an id, or its spec when the command resolved it), each VALUE
    parsed by the type the env declares for KEY (``preprocess=False`` is False); a wrong type or an unknown
    name is a one-line usage error."""
    texts = pair_texts(values, "--kwarg")
    if not texts:
        return {}
    from puffer_core.plugins import get_plugins  # deferred: the plugins load only for a command that needs them
    from puffer_core.specs.kwarg_types import parse_env_kwargs

    try:
        return parse_env_kwargs(env if isinstance(env, EnvSpec) else get_plugins().get_spec(env), texts)
    except APIUsageError as exc:
        raise click.UsageError(str(exc)) from None


def record_option(help: str) -> Any:
    """``--record PATH`` (the command's ``record_path``): where a recording goes, its suffix picking
    the format; and ``--overwrite`` (``overwrite``): an existing file is refused without it."""
    record = click.option("--record", "record_path", type=click.Path(dir_okay=False), help=help)
    overwrite = click.option("--overwrite", is_flag=True, help="Replace the --record file if it exists.")

    def both(command: Any) -> Any:
        return record(overwrite(command))

    return both


#: ``--kwarg KEY=VALUE`` (repeatable): keyword arguments for the env's creator.
env_kwargs_option = click.option(
    "--kwarg",
    "kwargs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Env kwarg; VALUE parsed by the type the env declares for KEY (true/false, a number, a JSON list, text).",
)


def saved_kwargs_options(command: Any) -> Any:
    """``--trust-kwargs`` (``trust_kwargs``) and ``--no-saved-kwargs`` (``no_saved_kwargs``): what
    becomes of the env kwargs a checkpoint holds (``saved_kwargs_mode`` turns them into one)."""
    trust = click.option(
        "--trust-kwargs",
        is_flag=True,
        help="Restore the checkpoint's env kwargs as they are, also those its env's plugin does not declare "
        "restorable (only for a checkpoint you trust: a kwarg can name a directory to write into).",
    )
    drop = click.option(
        "--no-saved-kwargs", is_flag=True, help="Leave the checkpoint's env kwargs out (the env's defaults, --kwarg)."
    )
    return trust(drop(command))


def saved_kwargs_mode(trust_kwargs: bool, no_saved_kwargs: bool) -> str:
    """``saved_kwargs`` of ``evaluate`` / ``ppo``: "trust", "drop" or "check" (neither flag)."""
    if trust_kwargs and no_saved_kwargs:
        raise click.UsageError("--trust-kwargs restores the saved env kwargs, --no-saved-kwargs drops them: give one")
    return "trust" if trust_kwargs else "drop" if no_saved_kwargs else "check"


RAY_ADDRESS_HELP = (
    "Run the Ray workers on this cluster: auto (the cluster `ray start` runs on this box), HOST:PORT "
    "of its head, or ray://HOST:PORT (Ray Client). Needs --backend ray.  [default: RAY_ADDRESS, else a "
    "Ray instance of our own on this machine]"
)
PLACEMENT_HELP = (
    "Place the Ray workers with a placement group, one bundle per worker: spread (over as many nodes "
    "as possible) or pack (on as few as possible). Needs --backend ray.  [default: Ray's own scheduling]"
)


def ray_options(command: Any) -> Any:
    """``--ray-address ADDR`` (``ray_address``) and ``--placement spread|pack`` (``placement``):
    where the Ray backend's workers run; ``ray_vector_kwargs`` checks them against the backend."""
    address = click.option("--ray-address", metavar="ADDR", help=RAY_ADDRESS_HELP)
    placement = click.option("--placement", type=click.Choice(PLACEMENTS), help=PLACEMENT_HELP)
    return address(placement(command))


def ray_vector_kwargs(backend: str | None, address: str | None, placement: str | None) -> dict[str, Any]:
    """The Ray backend's ``vector_kwargs`` that ``--ray-address`` and ``--placement`` give (empty
    without them); a one-line usage error when they come with another backend."""
    given = {"address": address, "placement": placement}
    chosen = {key: value for key, value in given.items() if value is not None}
    if chosen and backend != "ray":
        option = "--ray-address" if address is not None else "--placement"
        raise click.UsageError(f"{option} needs --backend ray (the other backends run on this machine only)")
    if address is not None and not address.strip():
        raise click.BadParameter("give auto, HOST:PORT or ray://HOST:PORT", param_hint="--ray-address")
    return chosen
