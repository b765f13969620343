"""What plugins return from their hooks: EnvSpec and DockerLayer (CompatAxes: :mod:`.compat`), and the name rules.

Each dataclass has a ``validate(plugin)`` method the plugin manager calls when it
loads a plugin, so a malformed value is reported once, naming the plugin and the
field, instead of failing later somewhere deep in ``make`` or the matrix runner.

``EnvSpec.restorable`` says, with the rules of :mod:`puffer_core.specs.kwarg_rules`, which creator
kwargs a checkpoint may bring back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from puffer_core.errors import PluginError
from puffer_core.specs.images import image_reference_problem
from puffer_core.specs.kwarg_rules import KwargRule
from puffer_core.specs.limits import MAX_FPS, number_in

__all__ = [
    "KNOWN_APIS",
    "BuildStage",
    "DockerLayer",
    "EnvSpec",
    "StageSource",
    "env_id_problem",
]

#: APIs the core understands natively; an adapter plugin may add its own names.
KNOWN_APIS = ("gymnasium", "gym", "pettingzoo", "pettingzoo-aec")

# ``\Z``: ids read from files (checkpoints) are checked with it too, and ``$`` would let a
# trailing newline through.
ENV_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
#: An id gymnasium registers: ``[NAMESPACE/]NAME[-vN]`` (``CartPole-v1``, ``ALE/Pong-v5``), ASCII only.
#: No ``:``: gymnasium.make reads ``module:Name-v0`` as "import module first", and an id may come
#: from a file (a checkpoint) that must not choose what is imported.
GYMNASIUM_ID_RE = re.compile(r"^(?:[A-Za-z0-9_-]+/)?[A-Za-z0-9_.-]+?(?:-v\d+)?\Z")
MAX_ENV_ID_LENGTH = 128
# ``\Z``, not ``$``: ``$`` also matches before a trailing newline. Plugin names and Python
# versions reach the matrix's command lines (``--plugin NAME``, ``uv venv --python X.Y``).
PLUGIN_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*\Z")
# Debian policy: lower case letters, digits, + - . ; at least two characters, starts alnum.
DEBIAN_PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
PYTHON_VERSION_RE = re.compile(r"^3\.\d+\Z")
# PEP 508 distribution names (what packaging itself checks names against).
PACKAGE_NAME_RE = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])\Z", re.IGNORECASE)
ENV_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Instructions a layer snippet may not carry: they would change the image's base or user.
FORBIDDEN_STEP_RE = re.compile(r"^\s*(FROM|USER)\b", re.IGNORECASE)
# A step is the shell command of one RUN line; one that starts like a Dockerfile instruction
# (written the way Dockerfiles spell them, upper case) was meant as Dockerfile text.
INSTRUCTION_STEP_RE = re.compile(
    r"^\s*(ADD|ARG|CMD|COPY|ENTRYPOINT|ENV|EXPOSE|HEALTHCHECK|LABEL|MAINTAINER|ONBUILD|RUN|SHELL|"
    r"STOPSIGNAL|VOLUME|WORKDIR)(\s|$)"
)
#: Endings an installer reads as a file to build or unpack rather than a package name (pip's and uv's lists).
ARCHIVE_SUFFIXES = (".whl", ".zip", ".egg", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz")
ARCHIVE_SUFFIXES += (".tar.zst", ".tar.lz", ".tar.lzma", ".tlz")
_ARCHIVE_PROBLEM = (
    "ends like an archive file, which an installer would build from this machine instead of fetching a package: "
    "give a package name from the index"
)
# Control characters (tab allowed) would let a value end the Dockerfile line it sits on.
CONTROL_CHAR_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\u0085\u2028\u2029]")
# Docker stage names: lower case, start with a letter.
STAGE_NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")
# A build argument standing for an image (``${BASE}``), where an image reference may stand.
IMAGE_ARG_RE = re.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$")
# Artifact paths are copied verbatim into ``COPY --from=...`` lines: plain absolute paths only.
#: A stage source's name, e.g. ``dmlab-source``: the build option ``--dmlab-source`` and the
#: variable ``PUFFER_DMLAB_SOURCE``.
SOURCE_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*-source\Z")
ARTIFACT_PATH_RE = re.compile(r"^/[A-Za-z0-9._+@/-]*$")


def plugin_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a plugin (the prefix of its env ids), or None when it can."""
    if PLUGIN_NAME_RE.match(name):
        return None
    return f"plugin name {name!r} is not valid: use lower-case letters, digits, '-' and '_'"


def env_id_problem(value: Any) -> str | None:
    """Why ``value`` is not an env id (a plugin's ``plugin/name``, or an id gymnasium registers such as
    ``CartPole-v1``), or None when it is."""
    if isinstance(value, str) and len(value) <= MAX_ENV_ID_LENGTH and gymnasium_id_problem(value) is None:
        return None
    if isinstance(value, str) and len(value) <= MAX_ENV_ID_LENGTH and ENV_ID_RE.match(value):
        return None
    return (f"is not an env id: 'plugin/name' or a gymnasium id such as 'CartPole-v1', of [A-Za-z0-9_.-], "
            f"at most {MAX_ENV_ID_LENGTH} characters")  # fmt: skip


def gymnasium_id_problem(value: Any) -> str | None:
    """Why ``value`` is not an id gymnasium could register (``[NAMESPACE/]NAME[-vN]``), or None when it is."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ENV_ID_LENGTH and GYMNASIUM_ID_RE.match(value):
        return None
    return "is not a gymnasium id: [NAMESPACE/]NAME[-vN] such as CartPole-v1 or ALE/Pong-v5"


def _fail(plugin: str, what: str, field_name: str, problem: str) -> PluginError:
    return PluginError(
        f"plugin '{plugin}': {what} field '{field_name}' {problem}",
        plugin=plugin,
        field=field_name,
    )


def _check_str_tuple(plugin: str, what: str, name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise _fail(plugin, what, name, f"must be a list of strings, got {value!r}")
    for item in value:
        if not isinstance(item, str) or not item:
            raise _fail(plugin, what, name, f"must hold non-empty strings, got {item!r}")
    return tuple(value)


@dataclass(frozen=True)
class EnvSpec:
    """One environment a plugin provides; ``creator(**kwargs)`` builds the raw env.

    What ``puffer_envs`` returns, one per env. Values are checked once, when the plugin
    loads: a bad one makes that plugin fail with a ``PluginError`` naming it and the field.

    Args:
        id: ``"<plugin>/<name>"``, the plugin part lower-case (``nethack/score``).
        creator: Builds the raw env from ``kwargs`` (merged with the caller's); it imports
            the environment's package itself, so listings work without it.
        kwargs: Default creator kwargs.
        api: What the raw env speaks: ``"gymnasium"``, ``"gym"``, ``"pettingzoo"``,
            ``"pettingzoo-aec"``, or an adapter plugin's own name.
        description: One line for ``puffer envs``.
        requires: What the creator needs, checked before it is called: import names
            (``"nle"``) or requirements with a version (``"ale-py>=0.9"``).
        install_hint: What to run when ``requires`` is missing (``pip install nle``).
        step_info_keys: Info keys kept on resets and ordinary steps; every other info entry
            waits for the episode's end.
        render_kwargs: Per render mode (``"rgb_array"``, ``"ansi"``), the creator kwargs that
            turn it on (default ``{"render_mode": mode}``).
        render_fps: Frames per second a recording plays at, one frame per step (None: the
            env's ``metadata["render_fps"]``).
        train_defaults: PPO settings (``puffer_core.train.PPOConfig`` fields) under which
            ``puffer train`` learns this env, like CleanRL's Atari settings; the user's
            settings override them.
        train_kwargs: Creator kwargs ``puffer train`` builds the env with, under the user's
            (e.g. the observation keys a policy learns best from).
        restorable: The creator kwargs a checkpoint may bring back (``puffer eval DIR``,
            ``puffer train --resume DIR``), each with a ``KwargRule`` saying what it may hold:
            ``{"frame_stack": IntRange(1, 16), "grayscale": Flag()}``. A saved kwarg not
            named here, or out of its bounds, is refused unless the user trusts it
            (``--trust-kwargs``); the plugin's own ``train_kwargs`` values come back without one.
        batch_creator: Builds K of these envs as one object stepping them at once (a native
            batch): ``batch_creator(num_envs, **kwargs)``, the same kwargs as ``creator``. It
            returns a ``gymnasium.vector.VectorEnv`` whose ``single_observation_space`` and
            ``single_action_space`` are the env's, in next-step autoreset (the step after an
            episode's end returns the reset observation with reward 0 and no flags), whose
            ``reset(seed=S)`` seeds its envs S, S+1, ... (or one generator from S; the plugin's
            docs say which), and whose infos are a dict of arrays. Hosted by every backend when a
            vector env asks for native batches (``vector_kwargs={"native": True}``);
            ``puffer check`` holds it to this contract.
    """

    id: str
    creator: Callable[..., Any]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    api: str = "gymnasium"
    description: str = ""
    #: What the creator needs, checked before it is called: import names (``"nle"``), or
    #: distribution requirements with a version (``"ale-py>=0.9"``).
    requires: tuple[str, ...] = ()
    #: What to run when ``requires`` is missing, e.g. ``pip install nle``.
    install_hint: str = ""
    #: Info keys kept on resets and ordinary steps when present (rare events: each one sent
    #: costs multiprocessing traffic); every other info entry waits for the episode's end.
    step_info_keys: tuple[str, ...] = ()
    #: How the env renders for recordings (``puffer run --record``/``--watch``): per render
    #: mode ("rgb_array" for MP4/GIF, "ansi" for asciinema casts and the terminal), the
    #: creator kwargs that turn it on. A mode not listed gets ``{"render_mode": mode}``.
    render_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Frames per second a recording plays at, one frame per step (None: the env's
    #: ``metadata["render_fps"]``); e.g. 15 for Atari's 60 Hz screen with a frameskip of 4.
    render_fps: float | None = None
    #: PPO settings that make ``puffer train`` learn this env (checked against PPOConfig when
    #: a training starts); ``--set`` overrides each.
    train_defaults: Mapping[str, Any] = field(default_factory=dict)
    #: Creator kwargs for training (under the user's ``--kwarg``); kept in the checkpoint.
    train_kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: The creator kwargs a checkpoint may bring back, and what each may hold: a file is data,
    #: and a kwarg such as a directory to write into must not come from one unchecked.
    restorable: Mapping[str, KwargRule] = field(default_factory=dict)
    #: ``batch_creator(num_envs, **kwargs)``: K envs stepped at once (a gymnasium VectorEnv), or None.
    batch_creator: Callable[..., Any] | None = None
    #: Gymnasium's own ids for this env (``NetHackScore-v0`` for ``nethack/score``): they resolve to this
    #: spec, with its wrappers and defaults, wherever an env id is taken; ``puffer check`` holds each to an
    #: id gymnasium registers once the env's package is imported.
    aliases: tuple[str, ...] = ()

    @property
    def plugin(self) -> str:
        """The plugin part of the id (``nethack`` in ``nethack/score``; ``gymnasium`` for gymnasium's own ids)."""
        return self.id.split("/", 1)[0] if ENV_ID_RE.match(self.id) else "gymnasium"

    @property
    def name(self) -> str:
        return self.id.split("/", 1)[1] if ENV_ID_RE.match(self.id) else self.id

    def unrestorable(self, kwargs: Mapping[str, Any]) -> dict[str, str]:
        """Each of ``kwargs`` a checkpoint may not bring back, with why (empty: all of them may).

        A kwarg comes back when its rule in ``restorable`` takes its value, or, without a rule,
        when it is the plugin's own ``train_kwargs`` value (what every run of the env saves)."""
        found = {}
        for key, value in kwargs.items():
            rule = self.restorable.get(key)
            if rule is not None:
                why = rule.problem(value)
            elif key in self.train_kwargs and _same(value, self.train_kwargs[key]):
                why = None
            else:
                why = "is not one the plugin declares restorable"
            if why is not None:
                found[key] = why
        return found

    def validate(self, plugin: str) -> None:
        what = f"EnvSpec {self.id!r}"
        if not isinstance(self.id, str) or len(self.id) > MAX_ENV_ID_LENGTH or not ENV_ID_RE.match(self.id):
            raise _fail(
                plugin,
                "EnvSpec",
                "id",
                f"must look like 'plugin/name' (lower-case plugin part), got {self.id!r}",
            )
        for alias in _check_str_tuple(plugin, what, "aliases", self.aliases):
            if gymnasium_id_problem(alias) is not None or ENV_ID_RE.match(alias):
                raise _fail(plugin, what, "aliases", f"holds {alias!r}, not a gymnasium id such as NetHackScore-v0")
        if self.creator is None or not callable(self.creator):
            raise _fail(plugin, what, "creator", f"must be callable, got {self.creator!r}")
        if self.batch_creator is not None and not callable(self.batch_creator):
            raise _fail(plugin, what, "batch_creator", f"must be None or callable, got {self.batch_creator!r}")
        if not isinstance(self.kwargs, Mapping):
            raise _fail(plugin, what, "kwargs", f"must be a mapping, got {self.kwargs!r}")
        if not isinstance(self.api, str) or not self.api:
            raise _fail(plugin, what, "api", f"must be a non-empty string, got {self.api!r}")
        if not isinstance(self.description, str):
            raise _fail(plugin, what, "description", "must be a string")
        for requirement in _check_str_tuple(plugin, what, "requires", self.requires):
            if any(op in requirement for op in "<>=!~"):
                try:
                    Requirement(requirement)
                except InvalidRequirement:
                    raise _fail(plugin, what, "requires", f"holds {requirement!r}, not a requirement") from None
        _check_str_tuple(plugin, what, "step_info_keys", self.step_info_keys)
        if not isinstance(self.render_kwargs, Mapping) or not all(
            isinstance(mode, str) and isinstance(kwargs, Mapping) for mode, kwargs in self.render_kwargs.items()
        ):
            raise _fail(plugin, what, "render_kwargs", "must map render modes (str) to creator kwargs (mappings)")
        fps = self.render_fps
        if fps is not None and not number_in(fps, 0, MAX_FPS, low_open=True):
            raise _fail(plugin, what, "render_fps", f"must be None or a number in (0, {MAX_FPS:g}], got {fps!r}")
        if not isinstance(self.install_hint, str):
            raise _fail(plugin, what, "install_hint", "must be a string")
        for name in ("train_defaults", "train_kwargs"):
            value = getattr(self, name)
            if not isinstance(value, Mapping) or not all(isinstance(key, str) and key for key in value):
                raise _fail(plugin, what, name, f"must map setting names (str) to values, got {value!r}")
        for key, value in self.train_defaults.items():
            if value is not None and not isinstance(value, (bool, int, float, str)):
                raise _fail(plugin, what, "train_defaults", f"holds {key}={value!r}; give numbers, flags or strings")
        self._validate_restorable(plugin, what)

    def _validate_restorable(self, plugin: str, what: str) -> None:
        rules = self.restorable
        if not isinstance(rules, Mapping) or not all(
            isinstance(key, str) and key.isidentifier() and isinstance(rule, KwargRule) for key, rule in rules.items()
        ):
            raise _fail(plugin, what, "restorable", "must map kwarg names to rules (IntRange, Flag, OneOf, …)")
        # Every run saves its train_kwargs: a rule for one must take the plugin's own value.
        for key, why in self.unrestorable(self.train_kwargs).items():
            raise _fail(plugin, what, "restorable", f"refuses train_kwargs {key}={self.train_kwargs[key]!r}: it {why}")


def _same(value: Any, expected: Any) -> bool:
    """Equal plain data of the same types (a saved ``True`` is not a declared ``1``)."""
    if type(value) is not type(expected):
        return False
    if isinstance(value, (list, tuple)):
        return len(value) == len(expected) and all(map(_same, value, expected))
    return value == expected


@dataclass(frozen=True)
class StageSource:
    """A folder the user gives ``puffer tank build``, copied into a build stage before its steps.

    For a source the build cannot download (no network to its host, or a licence that keeps
    it out of this repository): ``puffer tank build --NAME DIR`` (or the variable
    ``PUFFER_NAME``, upper case with ``_`` for ``-``) names the folder; without it, or when
    ``verify`` finds a problem, the build refuses to start, in one line.

    Args:
        name: ``<what>-source``, e.g. ``dmlab-source``: the option ``--dmlab-source`` and the
            variable ``PUFFER_DMLAB_SOURCE``.
        path: Where the stage sees the folder (absolute).
        how_to_get: One line: what the folder must be and how to get it (said when it is missing).
        verify: ``verify(pathlib.Path) -> str | None``: the problem with a given folder, in one
            line, or None. Called before anything is sent to the engine.
    """

    name: str
    path: str
    how_to_get: str
    verify: Callable[[Any], str | None] | None = None

    @property
    def option(self) -> str:
        """The build option naming the folder, e.g. ``--dmlab-source``."""
        return f"--{self.name}"

    @property
    def env_var(self) -> str:
        """The variable naming the folder when the option is not given, e.g. ``PUFFER_DMLAB_SOURCE``."""
        return "PUFFER_" + self.name.upper().replace("-", "_")


@dataclass(frozen=True)
class BuildStage:
    """A separate Docker build stage whose results are copied into the env layer.

    Args:
        name: The stage's name (``[a-z0-9_.-]``, starting with a letter).
        base: Its base image, by digest (a tag is refused when the tank is rendered).
        run: Shell commands, one RUN line each.
        artifacts: Absolute paths built in the stage and copied into the environment layer.
        apt: Debian packages the stage installs first.
        sources: Folders the user gives the build (:class:`StageSource`), copied in after
            ``apt``, before ``run``. Optional; added after the fields above.
    """

    name: str
    base: str
    run: tuple[str, ...] = ()
    #: Paths built in the stage and copied into the environment layer (same path).
    artifacts: tuple[str, ...] = ()
    apt: tuple[str, ...] = ()
    sources: tuple[StageSource, ...] = ()


@dataclass(frozen=True)
class DockerLayer:
    """What a plugin needs in PufferTank's environment layer (what ``puffer_docker_layer`` returns).

    Args:
        apt: Debian packages.
        run: Shell commands, one RUN line each (no newlines, heredocs, FROM or USER).
        env: Environment variables of the image.
        pip: Requirements installed with the common constraint set.
        stages: Separate build stages whose artifacts are copied in.
    """

    apt: tuple[str, ...] = ()
    run: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    pip: tuple[str, ...] = ()
    stages: tuple[BuildStage, ...] = ()

    def validate(self, plugin: str) -> None:
        what = "DockerLayer"
        _check_apt(plugin, what, "apt", self.apt)
        for step in _check_str_tuple(plugin, what, "run", self.run):
            _check_step(plugin, what, "run", step)
        if not isinstance(self.env, Mapping):
            raise _fail(plugin, what, "env", f"must be a mapping, got {self.env!r}")
        for key, value in self.env.items():
            if not isinstance(key, str) or not ENV_VAR_NAME_RE.match(key):
                raise _fail(plugin, what, "env", f"has {key!r}, which is not a valid variable name")
            if not isinstance(value, str) or CONTROL_CHAR_RE.search(value):
                raise _fail(plugin, what, "env", f"value of {key} must be a one-line string, got {value!r}")
        for req in _check_str_tuple(plugin, what, "pip", self.pip):
            if CONTROL_CHAR_RE.search(req) or req.lstrip().startswith("-"):
                raise _fail(plugin, what, "pip", f"holds {req!r}: give requirements, not options")
            try:
                Requirement(req)
            except InvalidRequirement as exc:
                raise _fail(plugin, what, "pip", f"holds {req!r}, which is not a requirement: {exc}") from None
        if not isinstance(self.stages, (list, tuple)):
            raise _fail(plugin, what, "stages", "must be a list of BuildStage")
        seen: set[str] = set()
        for stage in self.stages:
            if not isinstance(stage, BuildStage):
                raise _fail(plugin, what, "stages", f"holds {stage!r}, not a BuildStage")
            if not isinstance(stage.name, str) or not STAGE_NAME_RE.match(stage.name):
                raise _fail(
                    plugin, what, "stages", f"has a stage named {stage.name!r}; use [a-z0-9_.-], starting with a letter"
                )
            if stage.name in seen:
                raise _fail(plugin, what, "stages", f"has two stages named {stage.name!r}")
            seen.add(stage.name)
            if image_reference_problem(stage.base) is not None and not IMAGE_ARG_RE.match(str(stage.base)):
                raise _fail(plugin, what, "stages", f"stage {stage.name!r} has base {stage.base!r}; give one image")
            for step in _check_str_tuple(plugin, what, f"stages[{stage.name}].run", stage.run):
                _check_step(plugin, what, f"stages[{stage.name}].run", step)
            _check_apt(plugin, what, f"stages[{stage.name}].apt", stage.apt)
            for path in _check_str_tuple(plugin, what, f"stages[{stage.name}].artifacts", stage.artifacts):
                if not ARTIFACT_PATH_RE.match(path) or ".." in path.split("/"):
                    raise _fail(
                        plugin,
                        what,
                        f"stages[{stage.name}].artifacts",
                        f"holds {path!r}; give absolute paths of [A-Za-z0-9._+@/-], without '..'",
                    )
            _check_sources(plugin, what, stage)


def _check_sources(plugin: str, what: str, stage: BuildStage) -> None:
    name = f"stages[{stage.name}].sources"
    if not isinstance(stage.sources, (list, tuple)):
        raise _fail(plugin, what, name, "must be a tuple of StageSource")
    for source in stage.sources:
        if not isinstance(source, StageSource):
            raise _fail(plugin, what, name, f"holds {source!r}, not a StageSource")
        if not isinstance(source.name, str) or not SOURCE_NAME_RE.match(source.name):
            raise _fail(plugin, what, name, f"has a source named {source.name!r}; use <what>-source, e.g. dmlab-source")
        if (
            not isinstance(source.path, str)
            or not ARTIFACT_PATH_RE.match(source.path)
            or ".." in source.path.split("/")
        ):
            raise _fail(plugin, what, name, f"source {source.name!r} has path {source.path!r}; give an absolute path")
        if (
            not isinstance(source.how_to_get, str)
            or not source.how_to_get.strip()
            or CONTROL_CHAR_RE.search(source.how_to_get)
        ):
            raise _fail(plugin, what, name, f"source {source.name!r} needs how_to_get: one line saying how")
        if source.verify is not None and not callable(source.verify):
            raise _fail(plugin, what, name, f"source {source.name!r} has verify {source.verify!r}, not a callable")


def _check_apt(plugin: str, what: str, name: str, value: Any) -> None:
    for package in _check_str_tuple(plugin, what, name, value):
        if not DEBIAN_PACKAGE_RE.match(package):
            raise _fail(plugin, what, name, f"holds {package!r}, which is not a valid Debian package name")


def _check_step(plugin: str, what: str, name: str, step: str) -> None:
    """A step is the shell command of one RUN line, and must not be able to leave that line.

    Rejected: newlines and other control characters (a new line is a new instruction), a
    trailing backslash (it continues the RUN into the next rendered line), ``<<`` (a BuildKit
    heredoc would swallow the lines after it), FROM / USER (they would change the image's
    base or user) and other Dockerfile instructions written as steps.
    """
    if CONTROL_CHAR_RE.search(step):
        raise _fail(plugin, what, name, f"holds a step with a newline, which could smuggle in instructions: {step!r}")
    if step.rstrip().endswith("\\"):
        raise _fail(plugin, what, name, f"holds a step with a newline continuation (trailing backslash): {step!r}")
    if "<<" in step:
        raise _fail(
            plugin,
            what,
            name,
            f"holds a step with a heredoc ('<<'), which could swallow the lines after it: {step!r}; use printf",
        )
    if FORBIDDEN_STEP_RE.match(step):
        raise _fail(plugin, what, name, f"holds {step!r}: FROM and USER are not allowed in a layer snippet")
    if INSTRUCTION_STEP_RE.match(step):
        raise _fail(
            plugin, what, name, f"holds {step!r}, a Dockerfile instruction: give the shell command of a RUN step only"
        )


def package_name_problem(name: Any) -> str | None:
    """Why ``name`` is not a distribution name (PEP 508: letters, digits, ``._-``, alphanumeric at both
    ends), or None when it is. Such a name can never read as an option, a URL or a path."""
    if not isinstance(name, str) or not PACKAGE_NAME_RE.match(name):
        return "is not a package name (letters, digits, '.', '_' and '-', starting and ending with a letter or digit)"
    if name.lower().endswith(ARCHIVE_SUFFIXES):
        return _ARCHIVE_PROBLEM
    return None


def version_problem(version: Any) -> str | None:
    """Why ``version`` is not one exact version (``1.2.0``, ``2.0.0rc1``), or None when it is."""
    if not isinstance(version, str) or version != version.strip() or any(c.isspace() for c in version):
        return "is not a version (no spaces around or inside it)"
    try:
        Version(version)
    except InvalidVersion:
        return "is not a version"
    return None


def requirement_problem(text: Any) -> str | None:
    """Why ``text`` is not a requirement the matrix may pass to ``uv pip install``, or None.

    Accepted: a PEP 508 requirement naming a package of the index, with extras, a version
    specifier and a marker (``pettingzoo[butterfly]>=1.24; python_version < "3.13"``).
    Refused: anything an installer would read as an option (``--index-url=…``), a URL or a
    path (``name @ https://…``, ``./wheel.whl``, any ``/`` or ``\\``), a name ending like an
    archive (``evil-1.0.tar.gz``: uv installs that file, running its build), and text with
    line breaks or outer spaces.
    """
    if not isinstance(text, str) or not text:
        return "is not a requirement string"
    if text.startswith("-"):
        return "starts with '-', so an installer would read it as an option: give a requirement, not an option"
    if CONTROL_CHAR_RE.search(text) or text != text.strip():
        return "has a line break or spaces around it: give one requirement"
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        return f"is not a PEP 508 requirement: {str(exc).splitlines()[0]}"
    if requirement.url is not None or "/" in text or "\\" in text:
        return (
            "names a URL or path: matrix cells install from the package index only, so give name[extras] and a version"
        )
    if requirement.name.lower().endswith(ARCHIVE_SUFFIXES):
        return _ARCHIVE_PROBLEM
    return None


def _check_package(plugin: str, what: str, name: str, value: Any) -> None:
    problem = package_name_problem(value)
    if problem:
        raise _fail(plugin, what, name, f"holds {value!r}, which {problem}")


def _check_version(plugin: str, what: str, name: str, version: Any) -> None:
    problem = version_problem(version)
    if problem:
        raise _fail(plugin, what, name, f"holds {version!r}, which {problem}")
