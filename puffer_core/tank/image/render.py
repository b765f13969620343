"""Render PufferTank's environment layer, ``tank/Dockerfile.envs``, from the plugins.

Inputs: every selected plugin's ``DockerLayer``, the compatibility matrix's common
constraint set (``compat_matrix/constraints-common.txt``) and its hash-locked form
(``tank/requirements-envs.txt``, :mod:`puffer_core.tank.image.hashlock`). Output: one
Dockerfile, the same bytes for the same inputs (plugins sorted by name, apt and pip lists
de-duplicated and sorted, env vars sorted, no timestamps, nothing asked of an engine or an
index), laid out as

1. ``ARG BASE`` without a default: the base layer's image *id*, which ``puffer tank
   build`` passes, so the layer is built on exact bytes, never on whatever a tag names now;
2. one ``FROM <stage.base> AS <stage.name>`` build stage per ``BuildStage`` (its own apt
   install, then its steps), in plugin order; every stage base is pinned by digest
   (``name[:tag]@sha256:...``), which is checked here;
3. ``FROM ${BASE}``: one apt install of every plugin's packages; the constraint set and
   the plugin list written to ``/opt/puffertank/``; env vars; the hash-locked set copied
   in, checked against the sha256 this file names, and installed with ``pip install
   --require-hashes`` (its build backends first; sdists build against them, without build
   isolation, since an isolated build would fetch its backends unchecked); the build
   stages' artifacts; each plugin's run steps (in the plugin's own order: steps depend on
   one another, so they are never sorted). Without a constraint set (``--no-constraints``)
   the plugins' pip requirements are installed unpinned at the end instead.

Every step that may download starts with ``. /usr/local/lib/puffertank/ca.sh`` (a no-op
unless ``puffer tank build --ca-cert`` serves a CA bundle; see tank/README.md). Plugin
values were validated by ``DockerLayer.validate``, so none of them can end the line it is
written on; they are validated again here, and the cross-plugin clashes (two stages of
one name, two values for one env var, two stages writing one path) are caught here.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from puffer_core.errors import PluginError
from puffer_core.specs.declarations import CONTROL_CHAR_RE, DockerLayer
from puffer_core.specs.images import is_pinned
from puffer_core.tank.errors import ConstraintsError, TankError
from puffer_core.tank.image.hashlock import HASHLOCK_IN_IMAGE, HashLock, requirement_of

__all__ = [
    "BASE_ARG_RE",
    "CA_HELPER",
    "CONSTRAINTS_IN_IMAGE",
    "DEFAULT_CONSTRAINTS",
    "DEFAULT_OUTPUT",
    "PLUGINS_IN_IMAGE",
    "REPORTS_IN_IMAGE",
    "SOURCES_IN_CONTEXT",
    "Constraints",
    "find_root",
    "load_constraints",
    "plugin_layers",
    "render_envs",
    "select_layers",
    "source_in_context",
]

#: Paths relative to the repository root.
DEFAULT_CONSTRAINTS = "compat_matrix/constraints-common.txt"
DEFAULT_OUTPUT = "tank/Dockerfile.envs"
CA_HELPER_SOURCE = "tank/puffertank-ca.sh"
#: Where the build stages' sources (``BuildStage.sources``) sit in layer 2's build context.
SOURCES_IN_CONTEXT = "tank/sources"

#: Paths inside the image.
CA_HELPER = "/usr/local/lib/puffertank/ca.sh"
CONSTRAINTS_IN_IMAGE = "/opt/puffertank/constraints-common.txt"
PLUGINS_IN_IMAGE = "/opt/puffertank/plugins.txt"
#: pip's installation reports (``pip install --report``): what the lock's hashes come from.
REPORTS_IN_IMAGE = "/opt/puffertank/reports"
BACKENDS_IN_IMAGE = "/opt/puffertank/requirements-backends.txt"

#: An image a build stage may start from: pinned by digest (a tag alone floats), or the
#: tank's own base layer, whose id `puffer tank build` passes as BASE.
#: Layer 1's own argument, where a stage may start from the layer below instead of an image.
BASE_ARG_RE = re.compile(r"^\$\{?BASE\}?$")

#: The regeneration command the header names when the defaults were used.
DEFAULT_COMMAND = "nox -s tank (same as: puffer tank render)"

# Build arguments every stage declares: set by `puffer tank build`, never stored in the image.
BUILD_ARGS = (
    "ARG DEBIAN_FRONTEND=noninteractive",
    "ARG PUFFER_CA_URL",
    "ARG PUFFER_LOCK_URL",
    "ARG PIP_INDEX_URL",
    "ARG PIP_EXTRA_INDEX_URL",
    "ARG PIP_TRUSTED_HOST",
    "ARG PIP_DEFAULT_TIMEOUT",
)
SHELL = 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]'
CONTINUE = " \\"
ITEM_INDENT = "      "


# -- constraints ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Constraints:
    """The common constraint set: normalized requirement lines, sorted; ``source`` for the header.

    ``source`` is None when rendering without constraints (pip installs are then unpinned).
    """

    lines: tuple[str, ...] = ()
    source: str | None = None

    @classmethod
    def none(cls) -> Constraints:
        return cls((), None)


def load_constraints(path: str | pathlib.Path, display: str | None = None) -> Constraints:
    """Read a constraints file (``name==version`` lines; comments and blank lines ignored).

    A missing file raises :class:`ConstraintsError` saying how to produce one or do without;
    a line pip would read as an option, or that is not a plain requirement, is refused.
    """
    path = pathlib.Path(path)
    shown = display or str(path)
    if not path.is_file():
        raise ConstraintsError(
            f"the common constraint set {shown} does not exist. Produce it with `nox -s compat` "
            "(the compatibility matrix writes it), give another file with --constraints PATH, "
            "or render unpinned with --no-constraints."
        )
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        where = f"{shown}, line {number}"
        req = requirement_of(line, where, ConstraintsError, "a constraints file here holds requirements")
        if req.extras or req.url:
            raise ConstraintsError(f"{where}: {line!r}: constraints cannot carry extras or URLs")
        if not req.specifier:
            raise ConstraintsError(f"{where}: {line!r} constrains nothing; write name==version")
        text = str(req)
        found[text] = f"{canonicalize_name(req.name)}\0{text}"
    lines = tuple(sorted(found, key=lambda text: found[text]))
    return Constraints(lines, shown)


# -- selection -----------------------------------------------------------------------------


def _names(value: str | Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    return [part.strip() for part in parts if part.strip()]


def select_layers(
    layers: Mapping[str, DockerLayer],
    plugins: str | Iterable[str] | None = None,
    without: str | Iterable[str] | None = None,
) -> dict[str, DockerLayer]:
    """The layers of the chosen plugins, sorted by name.

    ``plugins`` (names or a comma list) keeps only those; ``without`` drops those. Naming a
    plugin that has no layer here is an error listing the ones that do.
    """
    wanted, dropped = _names(plugins), _names(without) or []
    unknown = [name for name in (wanted or []) + dropped if name not in layers]
    if unknown:
        available = ", ".join(sorted(layers)) or "none"
        raise TankError(
            f"no plugin named {', '.join(repr(n) for n in unknown)} is loaded here (plugins: {available}); "
            "install it (pip install -e plugins/NAME) or check `puffer plugins`"
        )
    chosen = sorted(layers) if wanted is None else sorted(set(wanted))
    chosen = [name for name in chosen if name not in set(dropped)]
    if not chosen:
        raise TankError("the selection leaves no plugin to render; check --plugins / --without")
    return {name: layers[name] for name in chosen}


def plugin_layers(plugin_set) -> tuple[dict[str, DockerLayer], list[str]]:
    """Every installed (non built-in) plugin's layer from a loaded ``PluginSet``, and warnings.

    A loaded plugin without a ``puffer_docker_layer`` hook gets an empty layer: it still
    belongs in the tank (layer 3 installs it). Failed plugins are left out, with a warning.
    """
    layers: dict[str, DockerLayer] = {}
    warnings: list[str] = []
    for name, info in sorted(plugin_set.plugins.items()):
        if info.source == "builtin":
            continue
        if info.status == "loaded":
            layers[name] = plugin_set.docker_layers.get(name, DockerLayer())
        elif info.status == "failed":
            warnings.append(f"plugin '{name}' is left out of the tank: {info.error}")
    return layers, warnings


def find_root(start: str | pathlib.Path | None = None) -> pathlib.Path:
    """The puffer-core checkout holding ``start`` (default: the working folder)."""
    here = pathlib.Path(start or pathlib.Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "tank" / "Dockerfile.base").is_file() and (folder / "pyproject.toml").is_file():
            return folder
    raise TankError(
        f"{here} is not inside a puffer-core checkout (no tank/Dockerfile.base above it); "
        "run `puffer tank` from the repository"
    )


# -- rendering -----------------------------------------------------------------------------


def _quote(text: str) -> str:
    """Single-quote for the shell (a plugin value is data, never shell syntax)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _env_value(text: str) -> str:
    """Double-quote for ENV: spaces kept, ``$VAR`` still expands (PATH=/x:$PATH works)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _run_block(head: str, items: list[str], tail: list[str]) -> list[str]:
    """``RUN head \\`` then ``&& ... \\`` and indented items, ending without a backslash."""
    lines = [f"RUN {head}"]
    for item in items:
        lines[-1] += CONTINUE
        lines.append(item)
    for part in tail:
        lines[-1] += CONTINUE
        lines.append(f" && {part}")
    return lines


def _apt_block(packages: Iterable[str]) -> list[str]:
    packages = sorted(set(packages))
    lines = _run_block(f". {CA_HELPER}", [" && apt-get update", " && apt-get install -y --no-install-recommends"], [])
    for package in packages:
        lines[-1] += CONTINUE
        lines.append(f"{ITEM_INDENT}{package}")
    lines[-1] += CONTINUE
    lines.append(" && rm -rf /var/lib/apt/lists/*")
    return lines


def source_in_context(name: str) -> str:
    """Where a stage source's files sit in layer 2's build context (see :mod:`~puffer_core.tank.image.sources`)."""
    return f"{SOURCES_IN_CONTEXT}/{name}"


def _step(step: str) -> str:
    return f"RUN . {CA_HELPER} && {step}"


def _stage_header() -> list[str]:
    return [SHELL, *BUILD_ARGS, f"COPY {CA_HELPER_SOURCE} {CA_HELPER}"]


def _check_clashes(layers: Mapping[str, DockerLayer]) -> None:
    stage_owner: dict[str, str] = {}
    artifact_owner: dict[str, str] = {}
    env_owner: dict[str, tuple[str, str]] = {}
    source_owner: dict[str, str] = {}
    for plugin, layer in layers.items():
        for stage in layer.stages:
            for source in stage.sources:
                owner = source_owner.setdefault(source.name, f"{plugin}:{stage.name}")
                if owner != f"{plugin}:{stage.name}":
                    raise PluginError(
                        f"build stages {owner} and {plugin}:{stage.name} both take a source named {source.name!r}",
                        plugin=plugin,
                        field=f"stages[{stage.name}].sources",
                    )
            other = stage_owner.setdefault(stage.name, plugin)
            if other != plugin:
                raise PluginError(
                    f"plugins '{other}' and '{plugin}' both declare a build stage named {stage.name!r}; "
                    "stage names must be unique in the tank (rename one)",
                    plugin=plugin,
                    field="stages",
                )
            for path in stage.artifacts:
                owner = artifact_owner.setdefault(path, f"{plugin}:{stage.name}")
                if owner != f"{plugin}:{stage.name}":
                    raise PluginError(
                        f"build stages {owner} and {plugin}:{stage.name} both produce artifact {path!r}",
                        plugin=plugin,
                        field=f"stages[{stage.name}].artifacts",
                    )
        for key, value in sorted(layer.env.items()):
            first = env_owner.setdefault(key, (plugin, value))
            if first[1] != value:
                raise PluginError(
                    f"plugins '{first[0]}' and '{plugin}' set env var {key} differently "
                    f"({first[1]!r} and {value!r}); the tank has one environment",
                    plugin=plugin,
                    field="env",
                )


def render_envs(
    layers: Mapping[str, DockerLayer],
    constraints: Constraints,
    *,
    hashlock: HashLock | None = None,
    command: str = DEFAULT_COMMAND,
) -> str:
    """The text of ``tank/Dockerfile.envs`` for ``layers`` ({plugin: DockerLayer}).

    ``hashlock``: the hash-locked set layer 2 installs with ``--require-hashes`` (checked to
    cover the constraint set by the caller, :meth:`HashLock.check_covers`); None installs
    the plugins' pip requirements under the constraint set alone, NOT hash-checked.
    ``command`` is how the header says to regenerate the file (the CLI passes the options
    it was given).
    """
    layers = _checked_layers(layers)
    names = list(layers)
    out = _header(names, constraints, hashlock, command)
    out += _build_stages(layers)
    out += _environment_layer(layers)
    out += _constraints_block(constraints, names)
    out += _env_block(layers)
    if hashlock is not None:
        out += _hashlock_block(hashlock)
    out += _artifacts_block(layers)
    out += _plugin_steps(layers)
    if hashlock is None:
        out += _pip_block(layers)
    # Last, so a change of selection does not invalidate the cached layers above.
    out += [
        "",
        'LABEL org.opencontainers.image.title="PufferTank environments" \\',
        f'      org.puffer.tank.plugins="{",".join(names)}"',
    ]
    return "\n".join(out) + "\n"


def _checked_layers(layers: Mapping[str, DockerLayer]) -> dict[str, DockerLayer]:
    """The layers sorted by plugin, each validated, none clashing, every stage base pinned."""
    if not layers:
        raise TankError("no plugin to render: install plugins (pip install -e plugins/NAME) or check the selection")
    layers = {name: layers[name] for name in sorted(layers)}
    for name, layer in layers.items():
        if not isinstance(layer, DockerLayer):
            raise PluginError(f"plugin '{name}': {layer!r} is not a puffer_core.DockerLayer", plugin=name)
        layer.validate(name)
    _check_clashes(layers)
    for name, layer in layers.items():
        for stage in layer.stages:
            if not (is_pinned(stage.base) or BASE_ARG_RE.match(stage.base)):
                raise PluginError(
                    f"plugin '{name}': build stage {stage.name!r} starts from {stage.base!r}, a tag, which "
                    "names different bytes from one day to the next; pin it by digest as "
                    "NAME[:TAG]@sha256:DIGEST (docker buildx imagetools inspect NAME:TAG shows the digest)",
                    plugin=name,
                    field=f"stages[{stage.name}].base",
                )
    return layers


def _header(names: list[str], constraints: Constraints, hashlock: HashLock | None, command: str) -> list[str]:
    """The generated-file header: what rendered it, from what, how to regenerate and build."""
    # All end up in comment lines: a newline in a path must not start an instruction.
    command = CONTROL_CHAR_RE.sub("?", command)
    source = CONTROL_CHAR_RE.sub("?", constraints.source) if constraints.source else None
    if hashlock is not None:
        pinned = [
            f"# and the common constraint set {source}, hash-locked in",
            f"# {CONTROL_CHAR_RE.sub('?', hashlock.path)} (sha256 {hashlock.sha256}).",
        ]
    elif source:
        pinned = [f"# and the common constraint set {source} (NOT hash-locked: pip checks versions, not bytes)."]
    else:
        pinned = ["# without a constraint set: pip is NOT pinned."]
    return [
        "# GENERATED FILE: do not edit. PufferTank layer 2, the environments' system dependencies.",
        "# Rendered by `puffer tank render` from the DockerLayer of the plugins",
        f"#   {', '.join(names)}",
        *pinned,
        f"# Regenerate: {command}",
        "# Build: puffer tank build --stage envs (tank/README.md explains the layers).",
        "#",
        "# hadolint global ignore=DL3008,DL3059",
        "#   DL3008 (pin apt versions): the base image's Debian release fixes them.",
        "#   DL3059 (consecutive RUNs): each plugin step keeps a shell of its own.",
        "",
        "# BASE: layer 1 by image id, never by tag; `puffer tank build` passes it. By hand:",
        "#   --build-arg BASE=\"$(docker image inspect --format '{{.Id}}' puffertank:base)\"",
        "ARG BASE",
    ]


def _build_stages(layers: Mapping[str, DockerLayer]) -> list[str]:
    """Build stages: what compiles from source, apart from the image that ships."""
    out: list[str] = []
    for plugin, layer in layers.items():
        for stage in layer.stages:
            out += ["", f"# ---- build stage {stage.name} (plugin {plugin}); only its artifacts are copied on ----"]
            out += [f"FROM {stage.base} AS {stage.name}", *_stage_header()]
            if stage.apt:
                out += _apt_block(stage.apt)
            for source in stage.sources:
                out.append(f"# {source.option} DIR (or {source.env_var}), sent with the build context")
                out.append(f"COPY {source_in_context(source.name)} {source.path}")
            out += [_step(step) for step in stage.run]
    return out


def _environment_layer(layers: Mapping[str, DockerLayer]) -> list[str]:
    """The layer that ships: its FROM, the constraint file's place, every plugin's apt packages."""
    out = ["", "# ---- the environment layer ----", "FROM ${BASE}", *_stage_header()]
    out.append(f"ARG PIP_CONSTRAINT={CONSTRAINTS_IN_IMAGE}")
    apt = sorted({package for layer in layers.values() for package in layer.apt})
    if apt:
        out += ["", "# System packages of every plugin, de-duplicated and sorted."]
        out += _apt_block(apt)
    return out


def _constraints_block(constraints: Constraints, names: list[str]) -> list[str]:
    """The common constraint set and the plugin list, written into the image."""
    out = ["", "# The common constraint set (pip reads it through PIP_CONSTRAINT in this layer's steps),"]
    out += ["# and the plugins layer 3 installs."]
    block = _run_block("mkdir -p /opt/puffertank", [], [])
    if constraints.lines:
        block[-1] += CONTINUE
        block.append(" && printf '%s\\n'")
        for line in constraints.lines:
            block[-1] += CONTINUE
            block.append(f"{ITEM_INDENT}{_quote(line)}")
        block[-1] += CONTINUE
        block.append(f"{ITEM_INDENT}> {CONSTRAINTS_IN_IMAGE}")
    else:
        block[-1] += CONTINUE
        block.append(f" && : > {CONSTRAINTS_IN_IMAGE}")
    block[-1] += CONTINUE
    block.append(f" && printf '%s\\n' {' '.join(names)} > {PLUGINS_IN_IMAGE}")
    return out + block


def _artifacts_block(layers: Mapping[str, DockerLayer]) -> list[str]:
    artifacts = [(stage.name, path) for layer in layers.values() for stage in layer.stages for path in stage.artifacts]
    if not artifacts:
        return []
    return ["", "# What the build stages made.", *(f"COPY --from={stage} {path} {path}" for stage, path in artifacts)]


def _env_block(layers: Mapping[str, DockerLayer]) -> list[str]:
    env = sorted({(key, value) for layer in layers.values() for key, value in layer.env.items()})
    if not env:
        return []
    out = ["", "# Environment variables of every plugin, sorted."]
    entries = [f"{key}={_env_value(value)}" for key, value in env]
    out.append("ENV " + entries[0] + (CONTINUE if len(entries) > 1 else ""))
    for index, entry in enumerate(entries[1:], start=2):
        out.append(f"    {entry}" + (CONTINUE if index < len(entries) else ""))
    return out


def _plugin_steps(layers: Mapping[str, DockerLayer]) -> list[str]:
    out: list[str] = []
    for plugin, layer in layers.items():
        if layer.run:
            out += ["", f"# Steps of plugin {plugin}, in its order."]
            out += [_step(step) for step in layer.run]
    return out


def _hashlock_block(hashlock: HashLock) -> list[str]:
    """The hash-locked set, copied in, checked against its digest, installed with --require-hashes."""
    out = [
        "",
        f"# The hash-locked Python set ({hashlock.path}), refused unless its sha256 is the one",
        "# named here; its build backends first, then every package of it, each file checked",
        "# against its hashes. No build isolation: an sdist in the set builds with the set's own",
        "# backends, where an isolated build would fetch them unchecked. pip's reports of what",
        f"# it installed (with each file's sha256) stay in {REPORTS_IN_IMAGE}/ for the lock.",
        f"COPY {hashlock.path} {HASHLOCK_IN_IMAGE}",
    ]
    tail = [
        f"echo '{hashlock.sha256}  {HASHLOCK_IN_IMAGE}' | sha256sum --check --strict --quiet -",
        f"mkdir -p {REPORTS_IN_IMAGE}",
    ]
    block = _run_block(f". {CA_HELPER}", [], tail)
    backends = hashlock.backends()
    if backends:
        block[-1] += CONTINUE
        block.append(" && printf '%s\\n'")
        for entry in backends:
            block[-1] += CONTINUE
            block.append(f"{ITEM_INDENT}{_quote(entry.requirement_line())}")
        block[-1] += CONTINUE
        block.append(f"{ITEM_INDENT}> {BACKENDS_IN_IMAGE}")
        block[-1] += CONTINUE
        block.append(
            " && pip install --no-cache-dir --require-hashes --no-deps"
            f" --report {REPORTS_IN_IMAGE}/2-envs-backends.json -r {BACKENDS_IN_IMAGE}"
        )
    block[-1] += CONTINUE
    block.append(
        " && pip install --no-cache-dir --require-hashes --no-build-isolation"
        f" --report {REPORTS_IN_IMAGE}/2-envs.json -r {HASHLOCK_IN_IMAGE}"
    )
    return out + block


def _pip_block(layers: Mapping[str, DockerLayer]) -> list[str]:
    pip = sorted({str(Requirement(req)) for layer in layers.values() for req in layer.pip}, key=str.lower)
    if not pip:
        return []
    out = [
        "",
        "# Python packages of every plugin, constrained by the common set if there is one (hence no",
        "# pins here: DL3013), NOT hash-checked: render with a hash-locked set for that.",
        "# hadolint ignore=DL3013",
    ]
    head = f". {CA_HELPER}"
    install = f" && pip install --no-cache-dir -c {CONSTRAINTS_IN_IMAGE}"
    block = _run_block(head, [install], [])
    for req in pip:
        block[-1] += CONTINUE
        block.append(f"{ITEM_INDENT}{_quote(req)}")
    return out + block
