"""Every hook is documented, and every hook has a test here (named test_hook_<hook>...)."""

from __future__ import annotations

import ast
import pathlib
import typing
from collections.abc import Callable
from typing import Any

import gymnasium
from plugin_site import GOOD, site_entry_points, write_plugin

from puffer_core import CompatAxes, DockerLayer, EnvSpec, environments, hooks
from puffer_core.plugins import load_plugins

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOOK_NAMES = [name for name in hooks.__all__ if name.startswith("puffer_")]


def test_hook_list_matches_module():
    defined = {name for name in vars(hooks) if name.startswith("puffer_") and callable(getattr(hooks, name))}
    assert set(HOOK_NAMES) == defined


def test_every_hook_has_a_docstring_and_a_docs_section():
    docs = (ROOT / "docs" / "hooks.md").read_text()
    for name in HOOK_NAMES:
        assert (getattr(hooks, name).__doc__ or "").strip(), f"{name} has no docstring"
        assert f"## `{name}(" in docs, f"{name} is not documented in docs/hooks.md"


def test_every_hookspec_declares_the_types_plugins_return():
    # A plugin author's type checker sees these; Any would hide a hook returning the wrong thing.
    wanted = {
        "puffer_envs": list[EnvSpec],
        "puffer_adapt": Any | None,
        "puffer_wrappers": list[Callable[[Any], Any]] | None,
        "puffer_docker_layer": DockerLayer | None,
        "puffer_compat_axes": CompatAxes | None,
    }
    assert {name: typing.get_type_hints(getattr(hooks, name))["return"] for name in HOOK_NAMES} == wanted
    for name in ("puffer_adapt", "puffer_wrappers"):
        assert typing.get_type_hints(getattr(hooks, name))["spec"] is EnvSpec


def test_every_hook_has_a_test():
    tree = ast.parse(pathlib.Path(__file__).read_text())
    tests = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    for name in HOOK_NAMES:
        assert any(t.startswith(f"test_hook_{name}") for t in tests), f"no test_hook_{name} in {__file__}"


def _plugins(site):
    return load_plugins(entry_points=site_entry_points(site), environ={})


def test_hook_puffer_envs(site):
    write_plugin(site, "good", GOOD)
    plugins = _plugins(site)
    assert plugins.plugins["good"].envs == ["good/cartpole", "good/needy"]
    env = environments.make_raw("good/cartpole", plugins=plugins)
    assert isinstance(env, gymnasium.Env)
    assert env.spec.id == "CartPole-v1"


def test_hook_puffer_adapt(site):
    write_plugin(
        site,
        "adapter",
        """
        import gymnasium
        import puffer_core
        from puffer_core import EnvSpec

        class Raw:  # speaks no known API
            pass

        class Adapted(gymnasium.Env):
            observation_space = gymnasium.spaces.Discrete(2)
            action_space = gymnasium.spaces.Discrete(2)
            def __init__(self, raw):
                self.raw = raw

        @puffer_core.hookimpl
        def puffer_envs():
            return [EnvSpec("adapter/raw", Raw, api="rawapi")]

        @puffer_core.hookimpl
        def puffer_adapt(env, spec):
            return Adapted(env) if isinstance(env, Raw) else None
        """,
    )
    plugins = _plugins(site)
    env = environments.make_raw("adapter/raw", plugins=plugins)
    assert type(env).__name__ == "Adapted" and type(env.raw).__name__ == "Raw"
    # An adapter that does not apply leaves other envs alone.
    assert isinstance(environments.make_raw("classic/cartpole", plugins=plugins).unwrapped, gymnasium.Env)


def test_hook_puffer_wrappers(site):
    write_plugin(
        site,
        "wrapping",
        """
        import gymnasium
        import puffer_core
        from puffer_core import EnvSpec

        class First(gymnasium.Wrapper):
            pass

        class Second(gymnasium.Wrapper):
            pass

        @puffer_core.hookimpl
        def puffer_envs():
            return [EnvSpec("wrapping/cartpole", lambda: gymnasium.make("CartPole-v1"))]

        @puffer_core.hookimpl
        def puffer_wrappers(spec):
            return [First, Second] if spec.plugin == "wrapping" else None
        """,
    )
    plugins = _plugins(site)
    env = environments.make_raw("wrapping/cartpole", plugins=plugins)
    assert type(env).__name__ == "Second" and type(env.env).__name__ == "First"
    other = environments.make_raw("classic/cartpole", plugins=plugins)
    assert type(other).__name__ not in {"First", "Second"}


def test_hook_puffer_docker_layer(site):
    write_plugin(site, "good", GOOD)
    layer = _plugins(site).docker_layers["good"]
    assert layer.apt == ("libbz2-dev",) and dict(layer.env) == {"GOOD": "1"}


def test_hook_puffer_compat_axes(site):
    write_plugin(site, "good", GOOD)
    plugins = _plugins(site)
    axes = plugins.compat_axes["good"]
    assert axes.versions == ("1.2.0",) and axes.python == ("3.11",)
    assert plugins.compat_axes["classic"].package == "gymnasium"
