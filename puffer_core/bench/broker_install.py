"""A box's login and broker installed beside this one's, for the login tests and the box bench.

:func:`install_broker` does in a folder of its own what ``tank/setup-host.sh`` does for a
box: puffer-core in a venv of the system Python (this interpreter may sit where other users
cannot read), a root-owned broker script run as ``python -I`` with its configuration written
into it (the box's image, the engine, where it records ownership), a login shell calling it,
a group of its own and the sudo rule letting that group run the broker (checked with
``visudo -c``). Nothing of the box's own (``/etc/puffertank``, group ``puffertank``,
``/etc/sudoers.d/puffertank``) is touched; :meth:`BrokerInstall.remove` undoes it all.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["BrokerInstall", "install_broker"]

ROOT = pathlib.Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
SUDOERS_DIR = pathlib.Path("/etc/sudoers.d")


@dataclass
class BrokerInstall:
    """Where the login and the broker are, the group that may run the broker, and how to undo it."""

    folder: pathlib.Path
    group: str
    login: pathlib.Path
    broker: pathlib.Path
    state: pathlib.Path
    image_file: pathlib.Path
    sudoers: pathlib.Path
    #: Each tank's limits (``puffer_core.tank.box.limits``'s file), as /etc/puffertank/limits is a box's.
    limits: pathlib.Path

    def sshd_config(self) -> str:
        """The sshd drop-in ``tank/setup-host.sh`` writes for a box, for this broker's group and login."""
        text = subprocess.run(["bash", str(ROOT / "tank" / "setup-host.sh"), "--print-sshd-config"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
        return text.replace("Group puffertank", f"Group {self.group}").replace(
            "ForceCommand /usr/local/bin/puffertank-login", f"ForceCommand {self.login}"
        )

    def enrol(self, name: str) -> None:
        """Make user ``name`` (home 0700) with the login as its shell, in the broker's group."""
        subprocess.run(["useradd", "--create-home", "-K", "HOME_MODE=0700", "--shell", str(self.login),
                        "--groups", self.group, name], check=True, capture_output=True)  # fmt: skip

    def remove(self) -> None:
        self.sudoers.unlink(missing_ok=True)
        subprocess.run(["groupdel", self.group], capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def _venv(folder: pathlib.Path) -> pathlib.Path:
    """puffer-core from this checkout (what the login and the broker import only) in a venv of the system Python."""
    if not os.path.exists(SYSTEM_PYTHON):
        raise RuntimeError(f"{SYSTEM_PYTHON} is missing: a Debian box has it (apt install python3 python3-venv)")
    venv = folder / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    uv = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", str(venv / "bin" / "python")]
    constraints = ROOT / "compat_matrix" / "constraints-common.txt"
    if constraints.is_file():
        uv += ["--constraint", str(constraints)]
    proc = subprocess.run([*uv, "--no-deps", str(ROOT), "packaging", "pluggy"], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"installing the login failed: {proc.stderr.strip()[-800:]}")
    return venv


def _script(path: pathlib.Path, venv: pathlib.Path, body: str) -> None:
    path.write_text(f"#!{venv}/bin/python -I\n# Written by puffer_core.bench.broker_install.\nimport sys\n{body}")
    path.chmod(0o755)


def install_broker(folder: pathlib.Path, image: str, docker_host: str | None = None, limits: str = "") -> BrokerInstall:
    """The login and its broker in ``folder`` (root's, 0755), for ``image`` on the engine at ``docker_host``,
    each tank limited by ``limits`` (the limits file's text; empty: the defaults derived from this machine)."""
    if os.geteuid() != 0:
        raise RuntimeError("installing a broker makes a group and a sudo rule: run as root")
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, 0, 0)
    folder.chmod(0o755)
    venv = _venv(folder)
    group = f"ptbroker{secrets.token_hex(3)}"
    subprocess.run(["groupadd", "--system", group], check=True, capture_output=True)
    state, docker_config, image_file = folder / "state", folder / "docker", folder / "image"
    docker_config.mkdir(mode=0o700)
    image_file.write_text(image + "\n")
    (folder / "limits").write_text(limits)
    config = (f"image_file={str(image_file)!r}, allowed_file={str(folder / 'images')!r}, state_dir={str(state)!r}, "
              f"docker_config={str(docker_config)!r}, docker_host={docker_host!r}, group={group!r}, "
              f"limits_file={str(folder / 'limits')!r}")  # fmt: skip
    broker, login = folder / "broker", folder / "login"
    _script(broker, venv, "from puffer_core.tank.box.broker import BrokerConfig, main\n\n"
            f"sys.exit(main(config=BrokerConfig({config})))\n")  # fmt: skip
    _script(login, venv, f"from puffer_core.tank.box.login import main\n\nsys.exit(main(broker={str(broker)!r}, "
            f"group={group!r}, path={str(login)!r}))\n")  # fmt: skip
    subprocess.run(["chmod", "-R", "a+rX,go-w", str(folder)], check=True)
    docker_config.chmod(0o700)
    sudoers = SUDOERS_DIR / group
    rule = f"# puffer_core.bench.broker_install: a test box's broker\n%{group} ALL=(root) NOPASSWD: {broker}\n"
    staged = SUDOERS_DIR / f".{group}.new"  # a name with a dot: sudo never reads it
    staged.write_text(rule)
    staged.chmod(0o440)
    check = subprocess.run(["visudo", "-cf", str(staged)], capture_output=True, text=True)
    if check.returncode != 0:
        staged.unlink()
        raise RuntimeError(f"visudo refused the rule: {check.stdout}{check.stderr}")
    staged.rename(sudoers)
    return BrokerInstall(folder, group, login, broker, state, image_file, sudoers, folder / "limits")
