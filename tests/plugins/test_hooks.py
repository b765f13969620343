"""Every hook is documented, and every hook has a test here (named test_hook_<hook>...)."""

from __future__ import annotations

import ast
import json
import pathlib
import typing
from collections.abc import Callable
from typing import Any

import gymnasium
import pytest
from plugin_site import GOOD, puffer_env, raises_in, run_puffer_many, site_entry_points, write_plugin

from puffer_core import CompatAxes, DockerLayer, EnvSpec
from puffer_core.env import environments
from puffer_core.errors import PluginError, UnknownEnvError
from puffer_core.plugins import load_plugins
from puffer_core.specs import hooks

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


# -- a plugin whose hook raises (issue 33): only that plugin fails ------------------------

#: hooks called as a plugin loads, and hooks ``make`` calls for every env
LOAD_HOOKS = ("puffer_envs", "puffer_docker_layer", "puffer_compat_axes")
MAKE_HOOKS = ("puffer_adapt", "puffer_wrappers")
#: what a plugin raises (Python source) → how the error quotes it
RAISED = {
    "SystemExit(3)": "SystemExit: 3",
    "GeneratorExit()": "GeneratorExit",
    "RuntimeError('boom')": "RuntimeError: boom",
}


def _steps(env):
    env.reset(seed=0)
    return env.step(env.action_space.sample())


@pytest.mark.parametrize("exception", RAISED)
@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_a_hook_that_raises_fails_only_its_plugin(site, hook, exception):
    write_plugin(site, "exiter", raises_in(hook, exception))
    write_plugin(site, "good", GOOD)
    plugins = _plugins(site)
    info = plugins.plugins["exiter"]
    if hook in LOAD_HOOKS:
        assert info.status == "failed" and f"{hook}() raised {RAISED[exception]}" in info.error
        env = environments.make_raw("classic/cartpole", plugins=plugins)
    else:
        assert info.status == "loaded"
        with pytest.warns(RuntimeWarning, match=f"plugin 'exiter': {hook}\\(\\) raised {RAISED[exception]}"):
            env = environments.make_raw("classic/cartpole", plugins=plugins)
        assert info.status == "failed" and "for 'classic/cartpole', another plugin's env" in info.error
        assert f"{hook}() raised {RAISED[exception]}" in info.error and info.traceback
    _steps(env)
    assert info.envs == [] and "exiter/cartpole" not in plugins.env_specs and "exiter" not in plugins.docker_layers
    with pytest.raises(UnknownEnvError, match="Its plugin 'exiter' did not load \\(failed\\): plugin 'exiter': "):
        environments.make_raw("exiter/cartpole", plugins=plugins)
    assert plugins.plugins["good"].status == "loaded" and plugins.docker_layers["good"].apt == ("libbz2-dev",)
    _steps(environments.make_raw("good/cartpole", plugins=plugins))
    _steps(environments.make_raw("classic/cartpole", plugins=plugins))  # again: the failed plugin stays out


@pytest.mark.parametrize("exception", RAISED)
@pytest.mark.parametrize("hook", MAKE_HOOKS)
def test_a_make_hook_that_raises_for_its_own_env_is_that_envs_error(site, hook, exception):
    write_plugin(site, "exiter", raises_in(hook, exception))
    plugins = _plugins(site)
    message = f"^exiter/cartpole: its plugin 'exiter' raised {RAISED[exception]} in {hook}\\(\\); fix or update"
    with pytest.raises(PluginError, match=message) as caught:
        environments.make_raw("exiter/cartpole", plugins=plugins)
    assert caught.value.plugin == "exiter" and caught.value.field == hook
    assert plugins.plugins["exiter"].status == "loaded"  # its own env's error; the plugin is not blamed for others


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_ctrl_c_in_a_hook_is_not_swallowed(site, hook):
    write_plugin(site, "stopper", raises_in(hook, "KeyboardInterrupt"))
    with pytest.raises(KeyboardInterrupt):
        plugins = _plugins(site)
        environments.make_raw("classic/cartpole", plugins=plugins)


def test_a_builtin_plugins_error_is_the_envs_error_and_fails_no_plugin(site, monkeypatch):
    """The built-in adapters are Puffer Core's own code: what one raises (a missing shimmy, a
    broken env) is the error of the env being made, as it is, and marks nothing failed."""
    from puffer_core import adapters, hookimpl

    @hookimpl
    def puffer_adapt(self, env, spec):
        raise ModuleNotFoundError("No module named 'shimmy'", name="shimmy")

    monkeypatch.setattr(adapters.GymAdapter, "puffer_adapt", puffer_adapt)
    plugins = _plugins(site)
    with pytest.raises(ModuleNotFoundError, match="shimmy"):
        environments.make_raw("classic/cartpole", plugins=plugins)
    assert plugins.plugins["gym"].status == "loaded" and plugins.plugins["classic"].status == "loaded"


ADAPTER = """
import puffer_core
from puffer_core import EnvSpec

class Raw:  # speaks no known API
    pass

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("aaaa/raw", Raw, api="rawapi")] if __name__.endswith("aaaa") else []

@puffer_core.hookimpl{options}
def puffer_adapt(env, spec):
    {body}
"""


def _adapter(site, name, body, options=""):
    write_plugin(site, name, ADAPTER.format(options=options, body=body))


@pytest.mark.parametrize("tryfirst", [False, True])
def test_adapt_keeps_pluggys_order(site, tryfirst):
    """puffer_adapt is firstresult: the first non-None result in pluggy's call order wins (the
    plugin loaded last first, unless an implementation says tryfirst), as without isolation."""
    _adapter(site, "aaaa", "return 'aaaa' if isinstance(env, Raw) else None", "(tryfirst=True)" if tryfirst else "")
    _adapter(site, "bbbb", "return 'bbbb' if spec.id == 'aaaa/raw' else None")
    plugins = _plugins(site)
    spec = plugins.get_spec("aaaa/raw")
    assert plugins.adapt(spec.creator(), spec) == plugins.pm.hook.puffer_adapt(env=spec.creator(), spec=spec)
    assert plugins.adapt(spec.creator(), spec) == ("aaaa" if tryfirst else "bbbb")
    assert plugins.adapt(object(), plugins.get_spec("classic/cartpole")) is None


def test_adapt_skips_a_plugin_that_raises_and_takes_the_next_result(site):
    _adapter(site, "aaaa", "return 'aaaa' if isinstance(env, Raw) else None")
    _adapter(site, "cccc", "raise SystemExit(3)")  # loaded last: called first
    plugins = _plugins(site)
    spec = plugins.get_spec("aaaa/raw")
    with pytest.warns(RuntimeWarning, match="plugin 'cccc': puffer_adapt\\(\\) raised SystemExit: 3 for 'aaaa/raw'"):
        assert plugins.adapt(spec.creator(), spec) == "aaaa"
    assert plugins.plugins["cccc"].status == "failed" and plugins.plugins["aaaa"].status == "loaded"
    assert plugins.adapt(spec.creator(), spec) == "aaaa"


def test_through_the_cli_a_plugin_exiting_in_any_hook_breaks_no_other_env(site):
    """`puffer plugins` names each plugin that raised SystemExit as it loaded, with the reason;
    `puffer run classic/cartpole` works beside all of them, in this process and in workers; a
    plugin's own env fails in one line naming it, also when only a worker's hook raises."""
    names = {hook: "exit-" + hook.removeprefix("puffer_").replace("_", "-") for hook in HOOK_NAMES}
    for hook, name in names.items():
        write_plugin(site, name, raises_in(hook))
    in_workers = "multiprocessing.parent_process() is not None"  # the main process's probe passes
    write_plugin(site, "exit-in-workers", raises_in("puffer_wrappers", when=in_workers))
    workers = ("--backend", "multiprocessing", "--num-envs", "2", "--num-workers", "2")
    cases = [
        ("plugins", "--json"),
        ("plugins",),
        ("run", "classic/cartpole", "--steps", "10", "--json"),
        ("run", "classic/cartpole", "--steps", "10", "--json", *workers),
        ("run", "exit-wrappers/cartpole", "--steps", "10"),
        ("run", "exit-in-workers/cartpole", "--steps", "10", *workers),
    ]
    listing, table, run, run_workers, own, own_in_workers = run_puffer_many(cases, puffer_env(site))
    assert listing.returncode == 0 and table.returncode == 0, listing.stderr + table.stderr
    infos = {info["name"]: info for info in json.loads(listing.stdout)["plugins"]}
    for hook in LOAD_HOOKS:
        info = infos[names[hook]]
        assert info["status"] == "failed" and f"{hook}() raised SystemExit: 3" in info["error"], info
        assert f"✗ {names[hook]}" in table.stdout
    for hook in MAKE_HOOKS:  # make calls them, not loading: `puffer plugins` calls them as make would
        info = infos[names[hook]]
        assert info["status"] == "failed" and f"{hook}() raised SystemExit: 3 for " in info["error"], info
        assert f"✗ {names[hook]}" in table.stdout
    assert infos["exit-in-workers"]["status"] == "loaded"  # its hook raises in workers only
    assert infos["classic"]["status"] == "loaded" and "puffer_envs() raised SystemExit: 3" in table.stdout
    for done in (run, run_workers):
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["steps"] >= 10
    for hook in MAKE_HOOKS:
        assert f"plugin '{names[hook]}': {hook}() raised SystemExit: 3 for 'classic/cartpole'" in run.stderr
    assert "plugin 'exit-in-workers': puffer_wrappers() raised SystemExit: 3" in run_workers.stderr
    wrappers = "its plugin 'exit-wrappers' raised SystemExit: 3 in puffer_wrappers(); fix or update the plugin"
    assert own.returncode == 1 and wrappers in own.stderr, own.stderr
    assert own_in_workers.returncode == 1 and "worker" in own_in_workers.stderr
    assert "its plugin 'exit-in-workers' raised SystemExit: 3 in puffer_wrappers()" in own_in_workers.stderr


@pytest.mark.parametrize("exception", RAISED)
@pytest.mark.parametrize("hook", MAKE_HOOKS)
def test_check_make_hooks_fails_a_plugin_whose_make_hook_raises_and_no_other(site, hook, exception):
    write_plugin(site, "exiter", raises_in(hook, exception))
    write_plugin(site, "good", GOOD)
    plugins = _plugins(site)
    assert plugins.plugins["exiter"].status == "loaded"  # loading does not call make's hooks
    plugins.check_make_hooks()
    info = plugins.plugins["exiter"]
    assert info.status == "failed" and info.traceback and info.envs == []
    assert info.error.startswith(f"plugin 'exiter': {hook}() raised {RAISED[exception]} for '")
    assert "make calls it for every env it builds" in info.error and "PUFFER_DISABLE_PLUGINS=exiter" in info.error
    assert {name: i.status for name, i in plugins.plugins.items() if name != "exiter"} == dict.fromkeys(
        ("classic", "gym", "pettingzoo-legacy", "good"), "loaded"
    )
    _steps(environments.make_raw("good/cartpole", plugins=plugins))
    _steps(environments.make_raw("classic/cartpole", plugins=plugins))


WRAPPERS_ONLY = """
import puffer_core
from puffer_core import EnvSpec

def _make():
    import gymnasium
    return gymnasium.make("CartPole-v1")

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec(__name__.removeprefix("puffer_plugin_") + "/cartpole", _make)]

@puffer_core.hookimpl
def puffer_wrappers(spec):
    {body}
"""


def test_check_make_hooks_judges_what_make_would(site):
    """A result make refuses fails the plugin; its own env's missing package does not (that env
    says so in `puffer envs`); a good plugin's hooks pass; the built-ins are not called."""
    bodies = {
        "badresult": "return ['not a wrapper'] if spec.plugin == 'badresult' else None",
        "needy": "if spec.plugin == 'needy':\n        import definitely_missing_pkg_xyz",
        "strict": "if spec.plugin != 'strict':\n        import definitely_missing_pkg_xyz",
        "fine": "return [lambda env: env] if spec.plugin == 'fine' else None",
    }
    for name, body in bodies.items():
        write_plugin(site, name, WRAPPERS_ONLY.format(body=body))
    plugins = _plugins(site)
    plugins.check_make_hooks()
    status = {name: plugins.plugins[name].status for name in bodies}
    assert status == {"badresult": "failed", "needy": "loaded", "strict": "failed", "fine": "loaded"}
    assert "a puffer_wrappers() result for 'badresult/cartpole' is 'not a wrapper', which is not callable" in (
        plugins.plugins["badresult"].error
    )
    assert "ModuleNotFoundError" in plugins.plugins["strict"].error
    assert "(another plugin's env)" in plugins.plugins["strict"].error
    assert all(info.status == "loaded" for info in plugins.plugins.values() if info.source == "builtin")
