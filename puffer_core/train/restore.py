"""What a saved run brings back: the env kwargs its env's plugin declares restorable, and the
settings that fit this machine.

A checkpoint is a file, maybe someone else's. Its env kwargs reach the env's creator
(NetHack's ``savedir`` names a directory nle writes into), so a saved kwarg is restored only
where the env's plugin declares it (``EnvSpec.restorable``) and within its bounds, unless the
caller trusts the file (``saved_kwargs="trust"``, ``--trust-kwargs``) or leaves its kwargs out
(``"drop"``, ``--no-saved-kwargs``); the caller's own kwargs replace saved ones unchecked.
Its settings passed ``PPOConfig.validate`` when it was read, as ``--set`` values do; those that
size this machine's work (envs, workers, torch threads) are adopted only up to what this
machine runs, unless the caller gives them again. Torch-free: the CLI checks before training.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from puffer_core.errors import APIUsageError, UnknownEnvError
from puffer_core.plugins import get_plugins
from puffer_core.specs.declarations import ENV_ID_RE, EnvSpec, env_id_problem
from puffer_core.train.config import RAY_ONLY, PPOConfig
from puffer_core.train.saved_data import short
from puffer_core.vector.checks import available_cpus

__all__ = [
    "ENVS_PER_CPU",
    "SAVED_KWARGS",
    "WORKERS_PER_CPU",
    "adopted_settings",
    "check_fits_machine",
    "names_an_env",
    "restored_kwargs",
    "saved_env_spec",
]

#: What to do with a checkpoint's env kwargs: check them against the env's declared schema,
#: trust them as they are, or drop them.
SAVED_KWARGS = ("check", "trust", "drop")
#: A saved run adopts at most this many envs, and workers, per CPU of this machine (and a
#: torch thread per CPU): beyond, a file would size this machine's work, not its user.
ENVS_PER_CPU = 1_024
WORKERS_PER_CPU = 8


def names_an_env(env: str) -> bool:
    """Whether a checkpoint's ``env`` is an id to look up (a plugin's ``plugin/name``, an alias, or an id
    gymnasium registers here), not the name of the creator a run was trained on."""
    return env_id_problem(env) is None and (ENV_ID_RE.match(env) is not None or get_plugins().knows(env))


def saved_env_spec(env: str, source: str) -> EnvSpec:
    """The spec of ``env``, a checkpoint's env, checked against the env-id grammar before it is
    looked up as one (an unknown one is refused before anything is printed or built).

    Raises:
        APIUsageError: not an env id (a run trained on a creator saves the creator's name).
        UnknownEnvError: no loaded plugin provides it.
    """
    why = env_id_problem(env)
    if why is None:
        try:
            return get_plugins().get_spec(env)
        except UnknownEnvError:
            if ENV_ID_RE.match(env):  # a plugin's id: the plugin is missing, which the error says
                raise
        why = "is no plugin's env and no id gymnasium registers here"
    raise APIUsageError(
        f"{source}: the run was trained on {short(env)}, which {why} (a creator's name, or an id registered "
        "by code not run here): to use it, pass that creator as env= from Python"
    )


def restored_kwargs(
    env: Any, saved: Mapping[str, Any], given: Mapping[str, Any] | None, mode: str, source: str
) -> dict[str, Any]:
    """The env kwargs a saved run is rebuilt with: ``saved`` (checked, trusted or dropped as
    ``mode`` says) under ``given``, the caller's, which replace saved ones unchecked. ``env``
    is the env's spec (looked up already), its id, or a creator (which declares none).

    Raises:
        APIUsageError: in mode "check", saved kwargs ``env``'s plugin does not declare
            restorable or that are out of its bounds (one line naming each); a bad ``mode``.
    """
    if mode not in SAVED_KWARGS:
        raise APIUsageError(f"saved_kwargs must be one of {', '.join(map(repr, SAVED_KWARGS))}, got {short(mode)}")
    given = dict(given or {})
    kept = {} if mode == "drop" else {key: value for key, value in saved.items() if key not in given}
    if mode == "check" and kept:
        spec = get_plugins().get_spec(env) if isinstance(env, str) else env
        refused = (
            spec.unrestorable(kept)
            if isinstance(spec, EnvSpec)
            else dict.fromkeys(kept, "is not declared (a creator declares none)")
        )
        if refused:
            shown = "; ".join(f"{key}={short(kept[key])} {why}" for key, why in refused.items())
            raise APIUsageError(
                f"{source}: refused the saved env kwargs {', '.join(map(repr, refused))} ({shown}); "
                "--trust-kwargs restores them as they are, --no-saved-kwargs leaves them out, "
                "--kwarg K=V replaces one"
            )
    return {**kept, **given}


def adopted_settings(saved: PPOConfig, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a resumed run takes from its checkpoint: all but the caller's and where Ray ran."""
    return {key: value for key, value in saved.to_dict().items() if key not in settings and key not in RAY_ONLY}


def check_fits_machine(config: PPOConfig, adopted: Mapping[str, Any], source: str, cpus: int | None = None) -> None:
    """Refuse adopted settings that size more work than this machine runs (the caller's own
    ``settings`` are theirs to choose, within ``PPOConfig.validate``'s bounds, as ``--set``'s are)."""
    cpus = cpus or available_cpus()
    limits = {"num_envs": ENVS_PER_CPU * cpus, "num_workers": WORKERS_PER_CPU * cpus, "torch_threads": cpus}
    for name, limit in limits.items():
        value = getattr(config, name)
        if name in adopted and value is not None and value > limit:
            raise APIUsageError(
                f"{source}: its {name}={value:,} is more than this machine's {cpus} CPU(s) run (at most {limit:,} when "
                f"read from a checkpoint); give --set {name}=N (Python: {name}=N) to choose"
            )
