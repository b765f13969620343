"""The peers ``puffer bench`` compares against: gymnasium's ``AsyncVectorEnv`` (shared
memory on); when ``pufferlib`` is importable (``PUFFERLIB_INSTALL``), PufferLib's Serial
and Multiprocessing at their usual settings; the env's native batch run alone and EnvPool
(:mod:`puffer_core.bench.native_peers`). Single-agent envs only."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from puffer_core.bench.cases import Case
from puffer_core.bench.native_peers import envpool_cases, native_alone_cases
from puffer_core.env.environments import make_raw
from puffer_core.plugins.apis import is_multiagent
from puffer_core.vector.checks import available_cpus
from puffer_core.vector.mp.start import default_start_method
from puffer_core.vector.timing import time_async, time_gym_vector

__all__ = ["PUFFERLIB_INSTALL", "PUFFERLIB_REQUIREMENTS", "peer_cases", "pufferlib_version"]

#: How to get PufferLib 3.0's vectorization here: the ``pufferlib`` 3.0.0 sdist downloads
#: raylib while it builds (impossible offline) and pins numpy<2; ``pufferlib-core`` is a
#: wheel of the same 3.0 core (``pufferlib.vector``). Its torch==2.9.0 pin is only for
#: the trainer, hence ``--no-deps`` (any installed torch satisfies ``import pufferlib``).
#: ``noxfile.py`` installs these (read from here, so the pin lives in one place).
PUFFERLIB_REQUIREMENTS = ("pufferlib-core==3.0.23", "psutil")
PUFFERLIB_INSTALL = "pip install --no-deps " + " ".join(f"'{r}'" if "=" in r else r for r in PUFFERLIB_REQUIREMENTS)


def pufferlib_version() -> str | None:
    """The importable PufferLib's version when ``pufferlib.vector`` imports, else None."""
    try:
        if importlib.util.find_spec("pufferlib") is None:
            return None
        import pufferlib
        import pufferlib.vector
    except Exception:  # an install missing torch or psutil counts as absent, not as a crash
        return None
    return str(getattr(pufferlib, "__version__", "?"))


def peer_cases(env_id: str, num_envs: int, seed: int, peer_python: str | None = None) -> list[Case]:
    """The peers' configurations on ``env_id``: none for a multi-agent env (they take single-agent envs only).
    Where the env has native batches, the batch run alone; with ``peer_python``, EnvPool there
    (:mod:`puffer_core.bench.native_peers`)."""

    def raw_creator() -> Any:
        return make_raw(env_id)

    probe = raw_creator()
    multi = is_multiagent(probe)
    with contextlib.suppress(Exception):
        probe.close()
    if multi:
        return []
    cases = [_async_vector_case(raw_creator, num_envs, seed)]
    version = pufferlib_version()
    if version is not None:
        cases.extend(_pufferlib_cases(raw_creator, num_envs, seed, version))
    cases.extend(native_alone_cases(env_id, num_envs, seed))
    if peer_python is not None:
        cases.extend(envpool_cases(env_id, num_envs, seed, peer_python))
    return cases


def _async_vector_case(raw_creator: Callable[[], Any], num_envs: int, seed: int) -> Case:
    def build() -> Any:
        from gymnasium.vector import AsyncVectorEnv

        # gymnasium forks by default; where this process runs other threads that may deadlock a child
        return AsyncVectorEnv([raw_creator] * num_envs, shared_memory=True, context=default_start_method())

    def measure(env: Any, seconds: float, warmup: float) -> float:
        return time_gym_vector(env, seconds, warmup, num_envs, env.single_action_space, seed)

    return Case(
        "gymnasium AsyncVectorEnv (shared memory)",
        "peer",
        "gymnasium-async",
        num_envs,
        num_envs,
        num_envs,
        build,
        measure,
    )


def _pufferlib_cases(raw_creator: Callable[[], Any], num_envs: int, seed: int, version: str) -> list[Case]:
    cases = []
    cpus = available_cpus()

    def case(name: str, backend_name: str, workers: int, batch: int) -> Case:
        def build() -> Any:
            import pufferlib.emulation
            import pufferlib.vector

            kwargs: dict[str, Any] = {}
            if backend_name == "Multiprocessing":
                kwargs = {"num_workers": workers, "batch_size": batch, "overwork": True}
            # PufferLib's workers end without closing their envs, so what an env keeps in the
            # temp dir (NetHack: a folder per game) would stay: its envs get a scratch temp
            # dir, which closing the case removes.
            scratch = tempfile.mkdtemp(prefix="puffer-bench-pufferlib-")
            try:
                with _temp_dir(scratch):
                    env = pufferlib.vector.make(
                        pufferlib.emulation.GymnasiumPufferEnv,
                        env_kwargs={"env_creator": raw_creator},
                        backend=getattr(pufferlib.vector, backend_name),
                        num_envs=num_envs,
                        seed=seed,
                        **kwargs,
                    )
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
            close = env.close

            def close_and_clean() -> None:
                try:
                    close()
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)

            env.close = close_and_clean
            return env

        def measure(env: Any, seconds: float, warmup: float) -> float:
            rows = getattr(env, "agents_per_batch", batch)
            return _time_pufferlib(env, seconds, warmup, rows, env.single_action_space, seed)

        return Case(
            f"PufferLib {version} {name}",
            "peer",
            f"pufferlib-{backend_name.lower()}",
            num_envs,
            workers,
            batch,
            build,
            measure,
        )

    cases.append(case("Serial", "Serial", 1, num_envs))
    for workers in sorted({1, min(cpus, num_envs)}):
        cases.append(case(f"Multiprocessing w={workers} b={num_envs}", "Multiprocessing", workers, num_envs))
    workers = min(cpus, num_envs)
    if workers > 1 and num_envs % workers == 0 and (num_envs // 2) % (num_envs // workers) == 0:
        cases.append(case(f"Multiprocessing w={workers} b={num_envs // 2}", "Multiprocessing", workers, num_envs // 2))
    return cases


@contextlib.contextmanager
def _temp_dir(path: str) -> Any:
    """``path`` as the temp dir of this process and of the processes it starts meanwhile."""
    saved_env, saved_module = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = path, path
    try:
        yield
    finally:
        tempfile.tempdir = saved_module
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env


def _time_pufferlib(env: Any, seconds: float, warmup: float, rows: int, space: Any, seed: int) -> float:
    return time_async(env, seconds, warmup, rows, space, seed, count_masks=False)
