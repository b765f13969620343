"""tank/setup-host.sh without an engine: `--help` explains every option the script parses and
what it never does. Its real runs are in tests/tank/test_setup_host_docker.py."""

from __future__ import annotations

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tank" / "setup-host.sh"


def test_help_explains_every_option_and_what_it_never_does():
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    parsed = set(re.findall(r"^\s+(?:-h \| )?(--[a-z-]+)\)", SCRIPT.read_text(), re.M))
    assert parsed >= {"--dry-run", "--docker-repo", "--source", "--image", "--user", "--no-nvidia", "--help"}
    for option in parsed:
        assert re.search(rf"^\s+(-h, )?{option}\b", proc.stdout, re.M), f"--help does not explain {option}"
    assert "never" in proc.stdout.lower() and "opens a port" in proc.stdout
    assert "Tailscale" in proc.stdout and "root-equivalent" in proc.stdout


def test_the_readme_documents_every_option():
    readme = (ROOT / "tank" / "README.md").read_text()
    for option in re.findall(r"^\s+(?:-h \| )?(--[a-z-]+)\)", SCRIPT.read_text(), re.M):
        assert option == "--help" or f"`{option}" in readme, f"tank/README.md does not document {option}"


def test_help_and_readme_say_what_root_takes_from_whom():
    """The source must be root's alone and the run keeps none of the caller's environment but
    the package index's settings: --help and the README say so, with the fix a refusal names."""
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    readme = (ROOT / "tank" / "README.md").read_text()
    for text in (proc.stdout, " ".join(readme.split())):
        assert "chown -R root:root DIR && chmod -R go-w DIR" in text
        assert "/usr/bin/python3" in text and "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in text
        assert all(name in text for name in ("PIP_INDEX_URL", "PIP_CERT", "PIP_DEFAULT_TIMEOUT", "umask 022"))
