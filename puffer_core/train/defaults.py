"""Per env family training defaults: what a plugin declares so that ``puffer train`` learns its envs.

A plugin puts PPO settings in its ``EnvSpec.train_defaults`` (``{"num_envs": 64,
"learning_rate": 1e-3, …}``) and creator kwargs in ``EnvSpec.train_kwargs`` (e.g. the
observation keys a policy learns best from). A new run starts from ``PPOConfig``'s defaults,
takes the env's on top, then the user's ``--set`` / ``--kwarg`` on top of those; the
checkpoint keeps the result, so a resumed or evaluated run uses the same. Envs given as a
creator rather than an id have none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.plugins import get_plugins
from puffer_core.specs.declarations import EnvSpec
from puffer_core.train.config import PPOConfig

__all__ = ["TrainDefaults", "defaults_of", "train_defaults"]


@dataclass(frozen=True)
class TrainDefaults:
    """An env's training defaults: ``settings`` (PPO) and ``env_kwargs`` (creator), and whose."""

    env: str
    plugin: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.settings or self.env_kwargs)

    def config(self, settings: dict[str, Any]) -> PPOConfig:
        """PPOConfig's defaults, these on top, then ``settings`` (the user's) on top: validated
        once; where that fails, these alone are checked too, to name the plugin when they are
        the culprit.

        Raises:
            APIUsageError: a setting of the plugin's that PPO does not have or does not take
                (naming the plugin), or a bad one of the user's.
        """
        base = self._checked(lambda: PPOConfig().replace(**self.settings))
        try:
            return base.replace(**settings).validate()
        except APIUsageError:
            if self.settings:
                self._checked(base.validate)
            raise

    def _checked(self, make: Callable[[], PPOConfig]) -> PPOConfig:
        """``make()``, with an error in the plugin's own settings said to be the plugin's."""
        try:
            return make()
        except APIUsageError as exc:
            raise APIUsageError(
                f"plugin '{self.plugin}': the train_defaults of {self.env} do not fit this puffer-core: {exc}"
            ) from None

    def kwargs(self, env_kwargs: dict[str, Any] | None) -> dict[str, Any]:
        """These creator kwargs with ``env_kwargs`` (the user's) on top."""
        return {**self.env_kwargs, **(env_kwargs or {})}

    def describe(self) -> str:
        """One line for people: what the plugin sets and how to override it."""
        parts = [f"{key}={value!r}" for key, value in self.settings.items()]
        parts += [f"{key}={value!r} (kwarg)" for key, value in self.env_kwargs.items()]
        return (
            f"{self.env}: training defaults of the {self.plugin} plugin: {', '.join(parts)} "
            "(--set KEY=VALUE and --kwarg KEY=VALUE override them)"
        )


def train_defaults(env: Any) -> TrainDefaults:
    """The training defaults ``env`` (an env id; anything else has none) declares."""
    if not isinstance(env, str):
        return TrainDefaults(env=str(env))
    return defaults_of(get_plugins().get_spec(env))


def defaults_of(spec: EnvSpec) -> TrainDefaults:
    """The training defaults of ``spec``, an env's spec already looked up."""
    return TrainDefaults(spec.id, spec.plugin, dict(spec.train_defaults), dict(spec.train_kwargs))
