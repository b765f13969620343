"""puffer_core.testing: fresh interpreters with some packages made unimportable."""

from __future__ import annotations

import pytest

from puffer_core.testing import envs_json, run_puffer, run_python


def test_blocked_package_and_its_submodules_fail_to_import_as_if_missing():
    code = """
    for name in ("numpy", "numpy.linalg"):
        try:
            __import__(name)
        except ModuleNotFoundError as exc:
            print(name, "missing", exc.name)
    import json  # everything else still imports
    print("json ok")
    """
    result = run_python(code, block=("numpy",))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["numpy missing numpy", "numpy.linalg missing numpy", "json ok"]


def test_unblocked_run_sees_the_extra_env():
    result = run_python(
        "import os; print(os.environ['PUFFER_ISOLATION_PROBE'])", extra_env={"PUFFER_ISOLATION_PROBE": "7"}
    )
    assert result.returncode == 0 and result.stdout == "7\n", result.stderr


def test_run_puffer_and_envs_json():
    listed = envs_json("--plugin", "classic")
    assert "classic/cartpole" in {env["id"] for env in listed["envs"]}
    result = run_puffer("envs", "--plugin", "no-such-plugin")
    assert result.returncode != 0 and "no-such-plugin" in result.stderr
    with pytest.raises(AssertionError, match="no-such-plugin"):
        envs_json("--plugin", "no-such-plugin")
