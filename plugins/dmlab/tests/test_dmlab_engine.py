"""The TEST DOUBLE against the real engine on the same seed and actions (dmlab_probe.py): action
order, observation spaces, the Lab's methods, the episode's length.

Needs the real ``deepmind_lab``: PUFFER_DMLAB_PYTHON names a Python where it imports (e.g. a
venv with the wheel PufferTank's dmlab stage builds), or it imports in this process. Without
either the test is skipped, naming that input; inside PufferTank
(tests/tank/test_tank_dmlab_docker.py) the same comparison runs against the image's engine.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import deepmind_lab_double
import dmlab_probe
import pytest

PROBE = Path(dmlab_probe.__file__)


def _real() -> dict:
    python = os.environ.get("PUFFER_DMLAB_PYTHON")
    if python:
        proc = subprocess.run([python, str(PROBE)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])
    try:
        import deepmind_lab
    except ImportError:
        pytest.skip(
            "the real deepmind_lab is not importable here: set PUFFER_DMLAB_PYTHON to a Python where it is "
            "(or run nox -s tank_dmlab -- --dmlab-source DIR, which compares inside PufferTank)"
        )
    if deepmind_lab is deepmind_lab_double or "double" in (deepmind_lab.__doc__ or "").lower()[:200]:
        pytest.skip("deepmind_lab here is the test double, not the engine")
    return dmlab_probe.probe(deepmind_lab)


def test_the_double_behaves_as_the_engine_on_one_seed_and_one_action_sequence():
    real = _real()
    double = dmlab_probe.probe(deepmind_lab_double)
    assert dmlab_probe.differences(real, double) == []
