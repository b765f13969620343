"""Envs by the ids gymnasium registers (``CartPole-v1``, ``ALE/Pong-v5``, a user's own ``gymnasium.register``).

Where no plugin declares an id (and no plugin env has it as an alias), an id in gymnasium's
registry becomes an env spec of its own: built by ``gymnasium.make(id, **kwargs)``, then through
the compatibility hooks and the emulation as any plugin's env. Its kwargs are checked against
the entry point's signature (with ``gymnasium.make``'s own: ``max_episode_steps``,
``render_mode``, ``disable_env_checker``). ALE's ids are registered by importing ale-py, which
is done when one is asked for.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from typing import Any

from puffer_core.specs.declarations import EnvSpec, gymnasium_id_problem

__all__ = ["GymnasiumId", "gymnasium_spec", "is_gymnasium_id", "note_once", "registered_ids", "unregistered_aliases"]


def make_keywords() -> tuple[str, ...]:
    """What every registered id takes beside its entry point's keywords: ``gymnasium.make``'s own
    (``max_episode_steps``, ``disable_env_checker`` in gymnasium 1.x), and ``render_mode``, which
    make hands the env and a recording asks for."""
    import gymnasium

    named = [p.name for p in inspect.signature(gymnasium.make).parameters.values() if p.kind == p.KEYWORD_ONLY
             or (p.kind == p.POSITIONAL_OR_KEYWORD and p.name != "id")]  # fmt: skip
    return (*named, "render_mode")


def _registry() -> Any:
    import gymnasium

    return gymnasium.envs.registry


def _register_for(env_id: str) -> None:
    """Import what registers ``env_id`` when gymnasium lacks it: ale-py registers ALE's ids (``ALE/Pong-v5``,
    ``PongNoFrameskip-v4``), when it is installed."""
    if env_id not in _registry() and importlib.util.find_spec("ale_py") is not None:
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)


def registered_ids() -> dict[str, str]:
    """Every id in gymnasium's registry (ALE's too, when ale-py is installed), sorted, with where its entry point is."""
    _register_for("ALE/Pong-v5")
    return {env_id: _where(spec.entry_point) for env_id, spec in sorted(_registry().items())}


def _where(entry: Any) -> str:
    """An entry point as text: ``module:Name`` as registered, or a callable's qualified name."""
    return entry if isinstance(entry, str) else getattr(entry, "__qualname__", None) or repr(entry)


class GymnasiumId:
    """A creator of a registered id: ``gymnasium.make(id, **kwargs)``, whose signature is the entry point's.

    Pickled with the id's registration, so a worker process that never ran the code registering
    it (a user's ``gymnasium.register`` in a test or a notebook) makes the same env."""

    def __init__(self, env_id: str, registration: Any = None):
        self.env_id = env_id
        self._registration = registration  # gymnasium's EnvSpec of the id, where this process lacks it

    def __call__(self, **kwargs: Any) -> Any:
        import gymnasium

        _register_for(self.env_id)
        if self.env_id not in _registry() and self._registration is not None:
            _registry()[self.env_id] = self._registration
        params = self.__signature__.parameters
        if "kwargs" not in params:  # said before gymnasium makes anything, in the words make's caller reads
            unknown = [key for key in kwargs if key not in params]
            if unknown:
                raise TypeError(f"{self.env_id} got an unexpected keyword argument {unknown[0]!r}; it takes: "
                                + ", ".join(sorted(params)))  # fmt: skip
        return gymnasium.make(self.env_id, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[str, Any]]:
        return GymnasiumId, (self.env_id, _registry().get(self.env_id, self._registration))

    def __repr__(self) -> str:
        return f"GymnasiumId({self.env_id!r})"

    @property
    def __name__(self) -> str:  # what names a creator in messages: the id
        return self.env_id

    @property
    def __signature__(self) -> inspect.Signature:
        """The entry point's keyword parameters (and ``**kwargs`` where it takes any), with make's own."""
        keywords = make_keywords()
        params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in keywords]
        try:
            creator = _entry_point(self.env_id)
            own = inspect.signature(creator).parameters.values()
        except (TypeError, ValueError, ImportError, AttributeError):
            own = [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)]
        names = set(keywords)
        for param in own:
            if param.kind == inspect.Parameter.VAR_KEYWORD:
                params.append(param.replace(name="kwargs"))
            elif param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) and (
                param.name not in names and param.name != "self"
            ):
                params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
                names.add(param.name)
        variadic = [p for p in params if p.kind == inspect.Parameter.VAR_KEYWORD][:1]
        return inspect.Signature([p for p in params if p.kind != inspect.Parameter.VAR_KEYWORD] + variadic)


def _entry_point(env_id: str) -> Any:
    """The callable gymnasium builds ``env_id`` with (its class, or its function)."""
    from gymnasium.envs.registration import load_env_creator

    entry = _registry()[env_id].entry_point
    return load_env_creator(entry) if isinstance(entry, str) else entry


#: The specs made so far (an id not registered is asked again: a user may register it later).
_MADE: dict[str, EnvSpec] = {}


def is_gymnasium_id(env_id: str) -> bool:
    """Whether ``env_id`` resolved to gymnasium's own registration (no plugin declares it or has it as an alias)."""
    return env_id in _MADE


def gymnasium_spec(env_id: str) -> EnvSpec | None:
    """The spec of a registered gymnasium id no plugin declares (None: gymnasium does not register it)."""
    if env_id in _MADE:
        return _MADE[env_id]
    if gymnasium_id_problem(env_id) is not None or importlib.util.find_spec("gymnasium") is None:
        return None
    _register_for(env_id)
    registry = _registry()
    if env_id not in registry:
        return None
    where = _where(registry[env_id].entry_point)
    spec = EnvSpec(id=env_id, creator=GymnasiumId(env_id), api="gymnasium",
                   description=f"gymnasium's {env_id} ({where}), made by gymnasium.make")  # fmt: skip
    _MADE[env_id] = spec
    return spec


def unregistered_aliases(spec: EnvSpec) -> list[str]:
    """``spec``'s aliases that its API's registry (gym's for a gym env) lacks once the env's packages are imported."""
    for name in spec.requires:  # importing nle registers NetHack's ids
        if name.isidentifier():
            importlib.import_module(name)
    for alias in spec.aliases:
        _register_for(alias)
    registry = importlib.import_module("gym").envs.registry if spec.api == "gym" else _registry()
    return [alias for alias in spec.aliases if alias not in registry]


#: The notes said in this process (each once: an alias resolved in every worker is said by none of them).
_NOTED: set[str] = set()


def note_once(line: str) -> None:
    """``puffer: LINE`` on stderr, once per process, in the main process only."""
    import multiprocessing

    if line in _NOTED or multiprocessing.parent_process() is not None:
        return
    _NOTED.add(line)
    print(f"puffer: {line}", file=sys.stderr)
