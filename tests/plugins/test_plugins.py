"""The plugin manager: discovery through real dist-info metadata, isolation, selection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from plugin_site import BAD_SPEC, BROKEN_IMPORT, GOOD, NO_CREATOR, claims, site_entry_points, write_plugin

from puffer_core.errors import PluginError, UnknownEnvError
from puffer_core.plugins import BUILTIN_PLUGINS, load_plugins
from puffer_core.plugins.manager import PUBLISHED_PLUGINS


def load(site, environ=None):
    return load_plugins(entry_points=site_entry_points(site), environ=environ or {})


def test_builtins_load_through_the_same_path():
    plugins = load_plugins(entry_points=[], environ={})
    assert set(BUILTIN_PLUGINS) <= set(plugins.plugins)
    assert all(plugins.plugins[name].status == "loaded" for name in BUILTIN_PLUGINS)
    assert plugins.plugins["classic"].source == "builtin"
    assert "classic/cartpole" in plugins.env_specs
    assert plugins.env_owner["classic/cartpole"] == "classic"


def test_good_plugin_is_discovered_with_its_distribution_version(site):
    write_plugin(site, "good", GOOD, version="2.3.4")
    plugins = load(site)
    info = plugins.plugins["good"]
    assert info.status == "loaded", info.error
    assert info.distribution == "puffer-plugin-good"
    assert info.version == "2.3.4"
    assert info.hooks == ["puffer_compat_axes", "puffer_docker_layer", "puffer_envs"]
    assert plugins.env_specs["good/cartpole"].description == "a good plugin's cartpole"
    assert plugins.docker_layers["good"].apt == ("libbz2-dev",)
    assert plugins.compat_axes["good"].package == "gymnasium"


def test_import_failure_disables_only_that_plugin(site):
    write_plugin(site, "good", GOOD)
    write_plugin(site, "broken", BROKEN_IMPORT)
    plugins = load(site)
    broken = plugins.plugins["broken"]
    assert broken.status == "failed"
    assert "broken" in broken.error and "definitely_missing_dependency_of_broken" in broken.error
    assert "ModuleNotFoundError" in broken.traceback
    assert plugins.plugins["good"].status == "loaded"
    assert "good/cartpole" in plugins.env_specs


@pytest.mark.parametrize(
    ("source", "name", "field", "fragment"),
    [
        (BAD_SPEC, "badspec", "id", "'plugin/name'"),
        (NO_CREATOR, "nocreator", "creator", "callable"),
    ],
)
def test_bad_env_spec_names_plugin_and_field(site, source, name, field, fragment):
    write_plugin(site, name, source)
    write_plugin(site, "good", GOOD)
    plugins = load(site)
    info = plugins.plugins[name]
    assert info.status == "failed"
    assert f"plugin '{name}'" in info.error and f"'{field}'" in info.error and fragment in info.error
    assert info.envs == []
    assert plugins.plugins["good"].status == "loaded"


def test_wrong_return_types_are_rejected(site):
    write_plugin(
        site,
        "wrongtype",
        """
        import puffer_core
        @puffer_core.hookimpl
        def puffer_envs():
            return {"not": "a list"}
        """,
    )
    write_plugin(
        site,
        "wronglayer",
        """
        import puffer_core
        @puffer_core.hookimpl
        def puffer_docker_layer():
            return ["apt-get install foo"]
        """,
    )
    plugins = load(site)
    assert "must return a list of EnvSpec" in plugins.plugins["wrongtype"].error
    assert "must return a puffer_core.DockerLayer" in plugins.plugins["wronglayer"].error


def test_unknown_hook_name_is_reported_as_a_typo(site):
    write_plugin(
        site,
        "typo",
        """
        import puffer_core
        @puffer_core.hookimpl
        def puffer_env():
            return []
        """,
    )
    info = load(site).plugins["typo"]
    assert info.status == "failed"
    assert "unknown hook(s) puffer_env" in info.error and "puffer_envs" in info.error


def test_hook_that_raises_is_isolated(site):
    write_plugin(
        site,
        "raiser",
        """
        import puffer_core
        @puffer_core.hookimpl
        def puffer_envs():
            raise RuntimeError("boom in envs")
        """,
    )
    info = load(site).plugins["raiser"]
    assert info.status == "failed" and "boom in envs" in info.error


def test_plugin_calling_sys_exit_on_import_is_isolated(site):
    write_plugin(site, "exiter", "import sys\nsys.exit(3)\n")
    plugins = load(site)
    assert plugins.plugins["exiter"].status == "failed"
    assert plugins.plugins["classic"].status == "loaded"


def test_duplicate_env_ids_name_both_plugins(site):
    write_plugin(site, "dupa", claims("shared/env"))
    write_plugin(site, "dupb", claims("shared/env"))
    plugins = load(site)
    assert plugins.duplicates == {"shared/env": ["dupa", "dupb"]}
    with pytest.raises(PluginError) as excinfo:
        plugins.get_spec("shared/env")
    assert "dupa" in str(excinfo.value) and "dupb" in str(excinfo.value)
    assert "PUFFER_DISABLE_PLUGINS" in str(excinfo.value)
    assert any("shared/env" in w and "dupa" in w and "dupb" in w for w in plugins.warnings)
    # Their other envs stay available.
    assert plugins.get_spec("shared/own_a").id == "shared/own_a"
    assert plugins.get_spec("shared/own_b").id == "shared/own_b"


def test_disabling_one_of_the_duplicates_resolves_the_clash(site):
    write_plugin(site, "dupa", claims("shared/env"))
    write_plugin(site, "dupb", claims("shared/env"))
    plugins = load(site, {"PUFFER_DISABLE_PLUGINS": "dupb"})
    assert plugins.duplicates == {}
    assert plugins.env_owner["shared/env"] == "dupa"
    assert plugins.plugins["dupb"].status == "disabled"


def test_disable_plugins_blocks_builtins_and_external(site):
    write_plugin(site, "good", GOOD)
    plugins = load(site, {"PUFFER_DISABLE_PLUGINS": "good, classic ,nonexistent"})
    assert plugins.plugins["good"].status == "disabled"
    assert plugins.plugins["classic"].status == "disabled"
    assert "classic/cartpole" not in plugins.env_specs
    assert any("nonexistent" in w for w in plugins.warnings)
    with pytest.raises(UnknownEnvError, match="disabled") as excinfo:
        plugins.get_spec("classic/cartpole")
    # each sentence of the message ends with a full stop
    assert "did not load (disabled): disabled by PUFFER_DISABLE_PLUGINS. Run `puffer envs`" in str(excinfo.value)


def test_load_plugins_selects_external_plugins(site):
    write_plugin(site, "good", GOOD)
    write_plugin(site, "dupa", claims("shared/env"))
    plugins = load(site, {"PUFFER_LOAD_PLUGINS": "good"})
    assert plugins.plugins["good"].status == "loaded"
    assert plugins.plugins["dupa"].status == "not selected"
    assert plugins.plugins["classic"].status == "loaded"  # built-ins load unless disabled
    none = load(site, {"PUFFER_LOAD_PLUGINS": ""})
    assert none.plugins["good"].status == "not selected"
    assert none.plugins["dupa"].status == "not selected"


def test_same_plugin_name_from_two_distributions_warns(site):
    write_plugin(site, "good", GOOD)
    write_plugin(site, "good", GOOD, dist="another-dist")
    plugins = load(site)
    assert plugins.plugins["good"].status == "loaded"
    assert any("provided twice" in w for w in plugins.warnings)


def test_plugin_class_entry_point_is_instantiated(site):
    write_plugin(
        site,
        "classy",
        """
        import puffer_core
        from puffer_core import EnvSpec
        class Plugin:
            @puffer_core.hookimpl
            def puffer_envs(self):
                return [EnvSpec("classy/env", lambda: None)]
        """,
    )
    # Point the entry point at the class rather than the module.
    info_dir = next(site.glob("puffer_plugin_classy-*.dist-info"))
    (info_dir / "entry_points.txt").write_text("[puffer]\nclassy = puffer_plugin_classy:Plugin\n")
    plugins = load(site)
    assert plugins.plugins["classy"].status == "loaded", plugins.plugins["classy"].error
    assert "classy/env" in plugins.env_specs


def test_unknown_id_suggests_close_ids():
    plugins = load_plugins(entry_points=[], environ={})
    with pytest.raises(UnknownEnvError) as excinfo:
        plugins.get_spec("classic/cartpol")
    assert "classic/cartpole" in str(excinfo.value)
    with pytest.raises(UnknownEnvError) as excinfo:
        plugins.get_spec("Cartpole")
    assert "classic/cartpole" in str(excinfo.value)


@pytest.mark.parametrize("env_id", ["nethackx/score", "cartpole-pro/cartpole"])
def test_an_unknown_plugin_gets_no_install_hint(env_id):
    """A hint built from the id would name a package anyone can register on the index."""
    plugins = load_plugins(entry_points=[], environ={})
    with pytest.raises(UnknownEnvError) as excinfo:
        plugins.get_spec(env_id)
    assert f"No plugin named {env_id.split('/')[0]!r} is installed." in str(excinfo.value)
    assert "pip install" not in str(excinfo.value)


@pytest.mark.parametrize("plugin", sorted(PUBLISHED_PLUGINS))
def test_a_plugin_this_project_publishes_gets_its_install_hint(plugin):
    plugins = load_plugins(entry_points=[], environ={})
    with pytest.raises(UnknownEnvError) as excinfo:
        plugins.get_spec(f"{plugin}/anything")
    message = str(excinfo.value)
    # No index serves the plugins yet: the hint installs from the checkout (a folder that exists) or built wheels.
    assert f"(install it from the checkout: pip install -e plugins/{plugin}, or a wheel built by nox -s dist" in message
    assert f"pip install puffer-plugin-{plugin} --find-links DIST; see docs/installation.md)" in message
    assert (Path(__file__).parents[2] / "plugins" / plugin / "pyproject.toml").is_file()


def test_the_published_plugins_are_the_repositorys():
    """Each folder of plugins/ and the distribution its pyproject.toml names."""
    root = Path(__file__).parents[2] / "plugins"
    found = {
        folder.name: re.search(r'^name = "([^"]+)"', (folder / "pyproject.toml").read_text(), re.MULTILINE).group(1)
        for folder in root.iterdir()
        if (folder / "pyproject.toml").exists()
    }
    assert PUBLISHED_PLUGINS == found
