"""The peers that step many envs at once, next to Puffer Core hosting native batches:

* the env's native batch run alone (its ``EnvSpec.batch_creator``: ALE's ``AtariVectorEnv``
  for atari/*, gymnasium's vector entry point for CartPole), stepped in a plain loop;
* EnvPool, in another interpreter (``peer_python``: EnvPool installs in an environment of its
  own), through ``peer_worker.py``, one process per measurement, at one thread per CPU,
  full and half batches (its asynchronous ``send``/``recv``).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from puffer_core.bench.cases import Case
from puffer_core.env.environments import make_batch_from_spec
from puffer_core.plugins import get_plugins
from puffer_core.vector.checks import available_cpus
from puffer_core.vector.timing import time_gym_vector

__all__ = ["ENVPOOL_ATARI_OPTIONS", "PeerProcess", "envpool_cases", "envpool_task", "native_alone_cases"]

#: EnvPool's Atari set up as the atari plugin's envs: sticky actions, no reward clipping, no
#: episode per life, 30 no-op starts, 84x84 grayscale frames, 4 stacked, 4 frames a step.
ENVPOOL_ATARI_OPTIONS = {
    "episodic_life": False,
    "reward_clip": False,
    "repeat_action_probability": 0.25,
    "noop_max": 30,
    "img_height": 84,
    "img_width": 84,
    "stack_num": 4,
    "frame_skip": 4,
}
_WORKER = Path(__file__).with_name("peer_worker.py")
#: Seconds a peer process may take to build its envs, and beyond a measurement to answer.
_START_TIMEOUT, _ANSWER_GRACE = 120.0, 60.0


def native_alone_cases(env_id: str, num_envs: int, seed: int) -> list[Case]:
    """The env's native batch stepped alone (none when its plugin declares no batch_creator)."""
    spec = get_plugins().get_spec(env_id)
    if spec.batch_creator is None:
        return []

    def build() -> Any:
        return make_batch_from_spec(spec, num_envs)

    def measure(batch: Any, seconds: float, warmup: float) -> float:
        return time_gym_vector(batch, seconds, warmup, num_envs, batch.single_action_space, seed)

    probe = make_batch_from_spec(spec, 1)
    kind = type(probe).__name__
    probe.close()
    return [Case(f"{kind} alone (the native batch)", "peer", "native-alone", num_envs, 1, num_envs, build, measure)]


def envpool_task(env_id: str) -> tuple[str, dict[str, Any]] | None:
    """EnvPool's task and options for ``env_id``, set up as our env; None where EnvPool has none."""
    if env_id == "classic/cartpole":
        return "CartPole-v1", {}
    if env_id.startswith("atari/"):
        game = env_id.split("/", 1)[1]
        return "".join(part.capitalize() for part in game.split("_")) + "-v5", dict(ENVPOOL_ATARI_OPTIONS)
    return None


class PeerProcess:
    """A peer's envs in another interpreter (``peer_worker.py``), built and waiting to be timed."""

    def __init__(self, python: str, config: dict[str, Any]):
        self.python = python
        self.proc = subprocess.Popen(
            [python, str(_WORKER), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": ""},  # the peer's own environment, not ours
        )
        try:
            answer = self._answer(_START_TIMEOUT)
        except BaseException:
            self.close()
            raise
        if "error" in answer:
            self.close()
            raise RuntimeError(f"{python}: {answer['error']}")
        self.version = answer.get("version")

    def _answer(self, timeout: float) -> dict[str, Any]:
        """The peer's next JSON line, or RuntimeError when it does not come within ``timeout``."""
        stdout = self.proc.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        ready: list = []
        while not ready:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                how = "exited" if self.proc.poll() is not None else f"did not answer within {timeout:.0f} s"
                raise RuntimeError(f"the peer process ({self.python}) {how}")
            ready, _, _ = select.select([stdout], [], [], min(left, 1.0))
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the peer process ({self.python}) closed its output")
        return json.loads(line)

    def measure(self, seconds: float, warmup: float) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"measure": seconds, "warmup": warmup}) + "\n")
        self.proc.stdin.flush()
        return float(self._answer(seconds + warmup + _ANSWER_GRACE)["sps"])

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(json.dumps({"close": True}) + "\n")
                self.proc.stdin.flush()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def envpool_cases(env_id: str, num_envs: int, seed: int, peer_python: str) -> list[Case]:
    """EnvPool at one thread per CPU, full and half batches, in ``peer_python`` (none where it has no task)."""
    task = envpool_task(env_id)
    if task is None:
        return []
    name, options = task
    threads = min(num_envs, available_cpus())
    cases = []
    for batch in dict.fromkeys((num_envs, num_envs // 2)):
        if batch < 1:
            continue
        config = {"library": "envpool", "task": name, "num_envs": num_envs, "batch_size": batch,
                  "num_threads": threads, "seed": seed, "options": options}  # fmt: skip

        def build(config: dict[str, Any] = config) -> PeerProcess:
            return PeerProcess(peer_python, config)

        def measure(peer: PeerProcess, seconds: float, warmup: float) -> float:
            return peer.measure(seconds, warmup)

        label = f"EnvPool t={threads} b={batch}"
        cases.append(Case(label, "peer", "envpool", num_envs, threads, batch, build, measure))
    return cases
