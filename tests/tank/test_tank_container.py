"""`puffer tank shell` / `run` / `lock` without a Docker engine: the `docker run` command
line (privileges dropped), the GPU decision and its reason, the uid:gid, the lock's
writing, parsing and digest (hashes included), and the one-line errors (no engine, no
client, bad arguments). The real runs are in tests/tank/test_tank_docker.py."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from puffer_core.tank.container import (
    CONTAINER_LABEL,
    WORKSPACE,
    RunRequest,
    check_capabilities,
    check_env,
    check_mount,
    check_shm_size,
    docker_argv,
    gpu_decision,
    parse_user,
    use_gpus,
    workdir_for,
)
from puffer_core.tank.errors import TankError
from puffer_core.tank.image.lock import (
    build_constraints,
    hash_constraints,
    local_projects,
    lock_base_image,
    lock_digest,
    lock_hashes,
    parse_lock,
    render_lock,
    report_hashes,
    single_hash_pins,
    write_lock,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]

LOCK = """# PufferTank lock: the Python packages of this image, as pip list --format=freeze reports them.
# python 3.11.2
Gymnasium==1.2.0
numpy==2.4.6
puffer-core==0.1.0
puffer_plugin_nethack==0.1.0
torch==2.5.1+cu124
"""


def test_docker_argv_mounts_runs_as_the_user_and_keeps_the_command_verbatim(tmp_path):
    request = RunRequest(
        image="puffertank:dev",
        mount=tmp_path,
        command=("python", "-c", "print(1)", "--flag"),
        user=(1234, 99),
        workdir=f"{WORKSPACE}/sub",
        env=("A=1",),
        quiet=True,
        network="none",
    )
    argv = docker_argv(request)
    assert argv[:5] == ["docker", "run", "--rm", "--init", "--interactive"]
    assert "--tty" not in argv and "--gpus" not in argv
    assert argv[argv.index("--user") + 1] == "1234:99"
    assert argv[argv.index("--mount") + 1] == f'type=bind,"source={tmp_path}","target={WORKSPACE}"'
    assert argv[argv.index("--workdir") + 1] == f"{WORKSPACE}/sub"
    assert argv[argv.index("--network") + 1] == "none"
    assert argv[argv.index("--shm-size") + 1] == "1g"
    assert ["--env", "PUFFERTANK_QUIET=1"] == argv[
        argv.index("PUFFERTANK_QUIET=1") - 1 : argv.index("PUFFERTANK_QUIET=1") + 1
    ]
    assert ["--env", "A=1"] == argv[argv.index("A=1") - 1 : argv.index("A=1") + 1]
    # The image, then the command exactly as given (docker run stops parsing at the image).
    assert argv[-5:] == ["puffertank:dev", "python", "-c", "print(1)", "--flag"]


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == flag]


def test_every_container_drops_all_capabilities_and_cannot_gain_privileges(tmp_path):
    for request in (
        RunRequest(image="puffertank:latest", mount=tmp_path),
        RunRequest(image="puffertank:latest", mount=tmp_path, user=(0, 0), gpus=True, tty=True, kind="shell"),
    ):
        argv = docker_argv(request)
        assert _pairs(argv, "--security-opt") == ["no-new-privileges"]
        assert _pairs(argv, "--cap-drop") == ["ALL"] and _pairs(argv, "--cap-add") == []
        assert _pairs(argv, "--label") == [f"{CONTAINER_LABEL}={request.kind}"]
        assert argv.index("--cap-drop") < argv.index(request.image)  # options, not the command's arguments
    # Given back only when asked, one by one.
    argv = docker_argv(RunRequest(image="i", mount=tmp_path, cap_add=("CHOWN", "SETUID")))
    assert _pairs(argv, "--cap-drop") == ["ALL"] and _pairs(argv, "--cap-add") == ["CHOWN", "SETUID"]


def test_cap_add_takes_linux_capability_names_only():
    assert check_capabilities(["setuid", "CAP_CHOWN", "CHOWN"]) == ("CHOWN", "SETUID")
    assert check_capabilities([]) == ()
    with pytest.raises(TankError, match="would undo --cap-drop ALL"):
        check_capabilities(["all"])
    with pytest.raises(TankError, match=r"'ROOT' is not a Linux capability"):
        check_capabilities(["ROOT"])


def test_docker_argv_tty_gpus_and_a_mount_path_with_commas_and_quotes():
    odd = pathlib.Path('/data/a,b:c/"q"')
    argv = docker_argv(RunRequest(image="puffertank:latest", mount=odd, tty=True, gpus=True))
    assert "--tty" in argv and argv[argv.index("--gpus") + 1] == "all"
    # A CSV field: the comma and colon stay in the path, the quotes are doubled.
    assert argv[argv.index("--mount") + 1] == f'type=bind,"source=/data/a,b:c/""q""","target={WORKSPACE}"'
    assert argv[-1] == "puffertank:latest"  # no command: the image's CMD (bash)


@pytest.mark.parametrize(
    ("mode", "runtimes", "expected"),
    [
        ("auto", {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}, True),
        ("auto", {"runc": {}, "io.containerd.runc.v2": {}}, False),
        ("auto", None, False),
        ("all", {"runc": {}}, True),  # asked for: docker says so itself if it cannot
        ("none", {"nvidia": {}}, False),
    ],
)
def test_gpus_pass_through_only_with_the_nvidia_runtime_unless_asked(mode, runtimes, expected):
    assert use_gpus(mode, runtimes) is expected


def test_gpus_mode_is_checked():
    with pytest.raises(TankError, match="give one of auto, all, none"):
        use_gpus("some", {})


def test_the_gpu_line_says_whether_gpus_are_passed_and_why():
    lines = {
        ("auto", "nvidia"): "puffertank: GPUs passed (--gpus all): the engine has the NVIDIA runtime (--gpus auto)",
        ("auto", "runc"): "puffertank: GPUs not passed: the engine has no NVIDIA runtime (runtimes: runc, "
        "runsc); --gpus all forces them, --gpus none quiets this",
        ("all", "runc"): "puffertank: GPUs passed (--gpus all): --gpus all as asked, though the engine lists no "
        "NVIDIA runtime (runtimes: runc, runsc); docker may refuse",
        ("none", "nvidia"): "puffertank: GPUs not passed: --gpus none",
    }
    for (mode, runtime), line in lines.items():
        runtimes = {"nvidia": {}, "runc": {}} if runtime == "nvidia" else {"runc": {}, "runsc": {}}
        assert gpu_decision(mode, runtimes).line() == line
    assert "runtimes: none reported" in gpu_decision("auto", None).reason


def test_user_defaults_to_the_caller_and_parses_uid_gid():
    assert parse_user(None) == (os.getuid(), os.getgid())
    assert parse_user("1234:99") == (1234, 99)
    assert parse_user("1234") == (1234, 1234)
    for bad in ("abc", "1:2:3", "-1:0", "1000:", "99999999999:1", "root:root"):
        with pytest.raises(TankError, match=r"is not UID:GID: give numbers, e\.g\. --user 1000:1000"):
            parse_user(bad)


def test_shm_size_and_env_are_checked():
    assert check_shm_size("2G") == "2g" and check_shm_size("512m") == "512m"
    with pytest.raises(TankError, match="is not a size"):
        check_shm_size("lots")
    assert check_env(["A=1", "B_2="]) == ("A=1", "B_2=")
    for bad in ("A", "=1", "1A=2", "A B=1"):
        with pytest.raises(TankError, match="is not KEY=VALUE"):
            check_env([bad])


def test_workdir_follows_the_working_folder_inside_the_mount(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert workdir_for(tmp_path, tmp_path) == WORKSPACE
    assert workdir_for(tmp_path, tmp_path / "a" / "b") == f"{WORKSPACE}/a/b"
    assert workdir_for(tmp_path / "a", tmp_path) == WORKSPACE  # outside the mount


def test_mount_must_be_an_existing_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    assert check_mount(str(tmp_path), lambda: None) == tmp_path.resolve()
    assert check_mount(None, lambda: ROOT) == ROOT  # the checkout by default
    with pytest.raises(TankError, match="no such folder; give an existing folder"):
        check_mount(str(tmp_path / "absent"), lambda: ROOT)
    with pytest.raises(TankError, match="is a file, not a folder"):
        check_mount(str(tmp_path / "file"), lambda: ROOT)

    def outside():
        raise TankError("not inside a checkout")

    with pytest.raises(TankError, match="give the folder to mount with --mount DIR"):
        check_mount(None, outside)


HEX = {name: f"sha256:{digit * 64}" for name, digit in (("numpy", "a"), ("gymnasium", "b"), ("pip", "c"))}
LOCK_WITH_HASHES = f"""# PufferTank lock: every Python package of this image, with the sha256 of its file.
# python 3.11.2
# base-image sha256:{"e" * 64}
gymnasium==1.2.0 --hash={HEX["gymnasium"]}
numpy==2.4.6 --hash={HEX["numpy"]}
pip==26.3 --hash={HEX["pip"]}
puffer-core==0.1.0  # from the checkout (/opt/puffer/src): a directory, not hash-checked
"""


def test_lock_with_hashes_parses_and_its_digest_covers_the_bytes():
    packages, hashes = parse_lock(LOCK_WITH_HASHES), lock_hashes(LOCK_WITH_HASHES)
    assert packages == {"gymnasium": "1.2.0", "numpy": "2.4.6", "pip": "26.3", "puffer-core": "0.1.0"}
    assert hashes == HEX
    assert lock_base_image(LOCK_WITH_HASHES) == "sha256:" + "e" * 64 and lock_base_image(LOCK) is None
    digest = lock_digest(packages, hashes)
    other_bytes = LOCK_WITH_HASHES.replace(HEX["numpy"], "sha256:" + "f" * 64)
    assert lock_digest(parse_lock(other_bytes), lock_hashes(other_bytes)) != digest  # same versions, other file
    assert digest != lock_digest(packages)
    # The rebuild constraints keep versions only (pip constraints pin versions; the set pins bytes).
    text = build_constraints(LOCK_WITH_HASHES, local_projects(ROOT), "lock.txt").decode()
    assert text.splitlines()[1:] == ["gymnasium==1.2.0", "numpy==2.4.6", "pip==26.3"]
    # Layer 1's PyTorch step gets the hashes too: each pin with its file's sha256, the checkout's own left out.
    pins = hash_constraints(LOCK_WITH_HASHES, local_projects(ROOT), "lock.txt").decode().splitlines()
    assert pins[0].startswith("# ") and pins[1:] == [
        f"gymnasium==1.2.0 --hash={HEX['gymnasium']}",
        f"numpy==2.4.6 --hash={HEX['numpy']}",
        f"pip==26.3 --hash={HEX['pip']}",
    ]
    assert hash_constraints(LOCK, set(), "lock.txt").decode().count("==") == 0  # a lock without hashes pins none


def test_lock_takes_each_files_hash_from_reports_or_a_single_hash_pin():
    reports = [
        {"install": [{"metadata": {"name": "NumPy", "version": "2.4.5"},
                      "download_info": {"archive_info": {"hash": "sha256=" + "1" * 64}}}]},
        {"install": [
            {"metadata": {"name": "numpy", "version": "2.4.6"},
             "download_info": {"archive_info": {"hashes": {"sha256": "2" * 64}}}},
            {"metadata": {"name": "puffer-core", "version": "0.1.0"}, "download_info": {"dir_info": {}}},
        ]},
    ]  # fmt: skip
    reported = report_hashes(reports)
    assert reported == {"numpy": ("2.4.6", "sha256:" + "2" * 64)}  # the later report wins; a directory has no hash
    pinned = single_hash_pins(
        ["pip==26.3 --hash=sha256:" + "3" * 64 + "\n", "setuptools==80.0 \\\n  --hash=sha256:" + "4" * 64 + " \\\n"
         "  --hash=sha256:" + "5" * 64 + "\n"]
    )  # fmt: skip
    assert pinned == {"pip": ("26.3", "sha256:" + "3" * 64)}  # two allowed files: which one is not known
    installed = {"numpy": "2.4.6", "pip": "26.3", "puffer-core": "0.1.0", "setuptools": "80.0", "six": "1.17"}
    text = render_lock(installed, reported, pinned, {"puffer-core"}, "3.11.2", "sha256:" + "e" * 64)
    lines = text.splitlines()
    assert lines[0].startswith("# PufferTank lock:") and "# python 3.11.2" in lines
    assert f"# base-image sha256:{'e' * 64}" in lines
    assert f"numpy==2.4.6 --hash=sha256:{'2' * 64}" in lines and f"pip==26.3 --hash=sha256:{'3' * 64}" in lines
    assert "puffer-core==0.1.0  # from the checkout (/opt/puffer/src): a directory, not hash-checked" in lines
    assert next(line for line in lines if line.startswith("six==")).startswith("six==1.17  # not hash-checked")
    assert parse_lock(text)["setuptools"] == "80.0" and "setuptools" not in lock_hashes(text)
    # A report of another version than the installed one proves nothing about the installed file.
    assert "numpy" not in lock_hashes(render_lock({"numpy": "2.4.7"}, reported, {}, (), "3.11.2", None))


def test_write_lock_reads_this_environment_and_the_images_reports(tmp_path):
    """The function layer 3 runs, pointed at a scratch root: this venv's packages, a report, a pin."""
    import importlib.metadata as md
    import json

    (tmp_path / "opt/puffertank/reports").mkdir(parents=True)
    numpy_version = md.version("numpy")
    report = {"install": [{"metadata": {"name": "numpy", "version": numpy_version},
                           "download_info": {"archive_info": {"hashes": {"sha256": "9" * 64}}}}]}  # fmt: skip
    (tmp_path / "opt/puffertank/reports/2-envs.json").write_text(json.dumps(report))
    # In the image this pins pip; pluggy stands in here (a uv venv has no pip).
    base_pin = f"pluggy=={md.version('pluggy')} --hash=sha256:{'8' * 64}\n"
    (tmp_path / "opt/puffertank/requirements-base.txt").write_text(base_pin)
    (tmp_path / "opt/puffertank/base-image.txt").write_text("debian@sha256:" + "7" * 64 + "\n")
    out = tmp_path / "lock.txt"
    text = write_lock(str(out), root=str(tmp_path))
    assert out.read_text() == text
    assert lock_hashes(text)["numpy"] == "sha256:" + "9" * 64 and lock_hashes(text)["pluggy"] == "sha256:" + "8" * 64
    assert lock_base_image(text) == "debian@sha256:" + "7" * 64
    assert parse_lock(text)["gymnasium"] == md.version("gymnasium")
    # puffer-core is installed from this checkout (editable): a directory, said so.
    assert next(line for line in text.splitlines() if line.startswith("puffer-core==")).endswith(
        "# from the checkout (/opt/puffer/src): a directory, not hash-checked"
    )


def test_lock_parses_digests_and_turns_into_build_constraints():
    packages = parse_lock(LOCK)
    assert packages["gymnasium"] == "1.2.0" and packages["puffer-plugin-nethack"] == "0.1.0"
    assert packages["torch"] == "2.5.1+cu124"
    # The digest ignores comments, order and name spelling, and sees every version.
    reordered = "gymnasium==1.2.0\ntorch==2.5.1+cu124\nnumpy==2.4.6\npuffer-plugin-nethack==0.1.0\npuffer_core==0.1.0\n"
    assert lock_digest(parse_lock(reordered)) == lock_digest(packages)
    assert lock_digest(parse_lock(reordered.replace("2.4.6", "2.4.5"))) != lock_digest(packages)
    # The checkout's own projects are installed from source: not pinned by the rebuild.
    text = build_constraints(LOCK, local_projects(ROOT), "/tmp/lock.txt").decode()
    assert text.splitlines()[0].startswith("# PufferTank build constraints from lock.txt")
    assert text.splitlines()[1:] == ["gymnasium==1.2.0", "numpy==2.4.6", "torch==2.5.1+cu124"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("numpy>=2\n", "line 1: 'numpy>=2' is not NAME==VERSION"),
        ("numpy==2 --hash=md5:00\n", "is not NAME==VERSION"),
        ("# only comments\n", "names no package"),
        ("numpy==2 ; python_version<'4'\n", "is not NAME==VERSION"),
    ],
)
def test_a_bad_lock_names_the_line(text, message):
    with pytest.raises(TankError, match=message):
        parse_lock(text, "FILE")


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "tank", *args],
        cwd=ROOT,
        env={**os.environ, "PUFFER_DEBUG": "", **env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("args", [["run", "--", "true"], ["lock", "puffertank:latest"]])
def test_no_engine_is_one_line_and_exit_2(tmp_path, args):
    url = f"unix://{tmp_path}/absent.sock"
    proc = _cli(args, DOCKER_HOST=url)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"no Docker engine answered at {url}: start one (dockerd)" in proc.stderr


def test_no_docker_client_is_one_line_and_exit_2(tmp_path):
    proc = _cli(["run", "--", "true"], PATH=str(tmp_path))  # a PATH without docker
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "the docker command-line client is not on PATH" in proc.stderr


def test_shell_without_a_terminal_points_at_run():
    proc = _cli(["shell"])
    assert proc.returncode == 1
    assert "puffer tank shell needs a terminal (stdin is not a TTY)" in proc.stderr
    assert "puffer tank run -- CMD" in proc.stderr


def test_build_lock_is_checked_before_the_engine(tmp_path):
    (tmp_path / "lock.txt").write_text("numpy>=2\n")
    proc = _cli(["build", "--stage", "final", "--lock", str(tmp_path / "lock.txt"), "--network", "host"])
    assert proc.returncode == 1 and "line 1: 'numpy>=2' is not NAME==VERSION" in proc.stderr
    proc = _cli(["build", "--stage", "final", "--lock", str(tmp_path / "lock.txt")])
    assert proc.returncode == 1 and "--lock needs --network host" in proc.stderr
    proc = _cli(["build", "--stage", "final", "--lock", str(tmp_path / "absent.txt"), "--network", "host"])
    assert proc.returncode == 1 and "no such file; write one with puffer tank lock IMAGE > FILE" in proc.stderr
