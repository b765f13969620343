"""A box's code that runs as root (the broker) and at every login (the login) loads the standard library and
puffer_core.tank.box alone; the box's names are declared once, and tank/setup-host.sh's copies match them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from puffer_core.tank.box import protocol

ROOT = Path(__file__).resolve().parents[2]
#: Modules of ours the box may load besides its own: the contract's standard-library-only ones.
ALLOWED_OURS = {
    "puffer_core",
    "puffer_core.atomic",
    "puffer_core.errors",
    "puffer_core.specs",
    "puffer_core.specs.images",
    "puffer_core.tank",
    "puffer_core.tank.errors",
    "puffer_core.tank.box",
}


@pytest.mark.parametrize("module", ["puffer_core.tank.box.broker", "puffer_core.tank.box.login"])
def test_the_broker_and_the_login_load_only_the_standard_library_and_the_box(module):
    """As installed: a fresh `python -I` (setup-host's scripts run so) imports the module, nothing else."""
    # What the import loaded, not what the interpreter started with (its .pth files' finders).
    probe = (f"import json, sys; before = set(sys.modules); import {module}; "
             "print(json.dumps(sorted(set(sys.modules) - before)))")  # fmt: skip
    loaded = json.loads(subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                                       check=True).stdout)  # fmt: skip
    ours = {name for name in loaded if name.split(".")[0] == "puffer_core"}
    others = {name for name in loaded if name.split(".")[0] not in sys.stdlib_module_names} - ours
    assert others == set(), f"{module} loads {sorted(others)}"
    extra = {name for name in ours - ALLOWED_OURS if not name.startswith("puffer_core.tank.box.")}
    assert extra == set(), f"{module} loads {sorted(extra)}"
    print(f"{module}: {len(loaded)} modules, {len(ours)} of ours")


#: setup-host.sh's variable for each of the box's names (the script runs before puffer-core is installed).
SETUP_HOST_NAMES = {
    "GROUP": "GROUP",
    "LOGIN": "LOGIN_PATH",
    "BROKER": "BROKER_PATH",
    "SUDOERS": "SUDOERS",
    "STATE_DIR": "STATE_DIR",
    "DOCKER_CONFIG_DIR": "DOCKER_CONFIG",
    "IMAGE_FILE": "IMAGE_FILE",
    "DEFAULT_IMAGE": "DEFAULT_IMAGE",
    "LIMITS_FILE": "LIMITS_FILE",
    "SSHD_DROPIN": "SSHD_DROPIN",
}


def test_setup_hosts_names_are_the_protocols():
    script = (ROOT / "tank" / "setup-host.sh").read_text()
    found = dict(re.findall(r"^([A-Z_]+)=(\S+)", script, re.MULTILINE))
    assert {variable: found.get(variable) for variable in SETUP_HOST_NAMES} == {
        variable: getattr(protocol, name) for variable, name in SETUP_HOST_NAMES.items()
    }
    labels = set(re.findall(r"label=(org\.puffer\.tank\.[a-z]+)", script))
    assert labels == {protocol.LOGIN_LABEL}


def test_a_bind_mount_quotes_what_docker_would_split():
    assert protocol.bind_mount("/home/a,b", "/x:y") == 'type=bind,"source=/home/a,b","target=/x:y"'
    assert protocol.bind_mount('/q"uote', "/t") == 'type=bind,"source=/q""uote","target=/t"'


def test_become_names_a_program_that_cannot_start():
    with pytest.raises(protocol.TankError, match="cannot start /nonexistent/program: No such file"):
        protocol.become("/nonexistent/program", ["program"])
