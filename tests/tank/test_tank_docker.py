"""PufferTank built for real: the three layers with the nethack and atari plugins on a
debootstrapped Debian 12 base (PyTorch skipped), then NetHack and Breakout run inside.
Also: the base recorded by image id, layer 2's `--require-hashes` install and the lock's
hashes, pip refusing a file whose hash differs, and `puffer tank run` containers without
capabilities or a way to gain privileges.

Needs a Docker engine and the base image that ``tank/ci-setup.sh`` prepares (engine,
debootstrap, ``puffertank-debian:bookworm``). Skipped when no engine answers, unless
``PUFFER_DOCKER_TESTS=1`` (what .ci/run sets), which turns a missing engine into a failure.

Environment: PUFFERTANK_DEBIAN_IMAGE (base image, default puffertank-debian:bookworm),
PUFFERTANK_CA_CERT (CA bundle for --ca-cert, default the system bundle when present).
The first build takes minutes (about 3 for the base, 1 for the envs, 1.5 for the final
layer here); later runs hit the engine's layer cache and take seconds.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest
from docker_tank import BASE_IMAGE, IMAGES, ROOT, TAG, run_in

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _stdout(client, command, image=IMAGES["final"]) -> str:
    """A command's stdout alone, no banner."""
    return run_in(client, image, command, stderr=False)


def _run(client, command, image=IMAGES["final"], **kwargs) -> str:
    """A command's stdout and stderr, the entrypoint's banner included."""
    return run_in(client, image, command, quiet=False, **kwargs)


def test_three_layers_are_built_and_chained(client, built):
    for stage, image in IMAGES.items():
        assert client.images.get(image), stage
    labels = client.images.get(IMAGES["envs"]).labels
    assert labels["org.puffer.tank.plugins"] == "atari,nethack"
    # Layer 3 sits on layer 2, which sits on layer 1.
    final_layers = client.images.get(IMAGES["final"]).attrs["RootFS"]["Layers"]
    envs_layers = client.images.get(IMAGES["envs"]).attrs["RootFS"]["Layers"]
    base_layers = client.images.get(IMAGES["base"]).attrs["RootFS"]["Layers"]
    assert final_layers[: len(envs_layers)] == envs_layers
    assert envs_layers[: len(base_layers)] == base_layers


@pytest.mark.parametrize(("env_id", "plugin"), [("nethack/score", "nethack"), ("atari/breakout", "atari")])
def test_envs_run_inside_the_tank(client, built, env_id, plugin):
    out = _run(client, ["puffer", "run", env_id, "--steps", "200"])
    assert f"{env_id}: 200 steps in" in out, out
    # The entrypoint's banner: versions, and the warning that no GPU is visible here.
    assert "puffertank: python 3.11" in out and f"puffer-plugin-{plugin} 0.1.0" in out, out
    assert "puffer-core 0.1.0" in out
    assert "no GPU visible" in out


def test_a_recording_is_made_inside_the_tank(client, built):
    """`--record run.mp4` (puffer-core's record extra is in the image): Breakout's frames, which change."""
    script = (
        "mkdir -m 700 /tmp/rec && puffer run atari/breakout --steps 300 --record /tmp/rec/b.mp4 > /dev/null && "
        "python -c \"import imageio.v3 as iio; f = iio.imread('/tmp/rec/b.mp4'); "
        'print(len(f), len({x.tobytes() for x in f}))"'
    )
    frames, distinct = map(int, _stdout(client, ["bash", "-c", script]).split()[-2:])
    assert frames >= 100 and distinct > 10, (frames, distinct)


def test_ray_is_in_the_tank_to_join_a_cluster(client, built):
    assert _stdout(client, ["ray", "--version"]).startswith("ray, version ")


def test_base_layer_has_python_311_in_a_venv_and_tools(client, built):
    out = _run(
        client,
        ["bash", "-c", "python --version; command -v python pip git vim curl gcc make nvim; "
         "python -c 'import torch' 2>&1 | tail -1"],
    )  # fmt: skip
    assert "Python 3.11." in out
    for tool in ("/opt/venv/bin/python", "/opt/venv/bin/pip", "git", "vim", "curl", "gcc", "make", "nvim"):
        assert tool in out, out
    assert "No module named 'torch'" in out  # TORCH was empty


def test_entrypoint_passes_exit_codes_and_quiet_mode(client, built):
    import docker

    with pytest.raises(docker.errors.ContainerError) as excinfo:
        _run(client, ["bash", "-c", "exit 7"])
    assert excinfo.value.exit_status == 7
    quiet = _run(client, ["echo", "hello"], environment={"PUFFERTANK_QUIET": "1"})
    assert quiet.strip() == "hello"


def test_ca_bundle_is_not_left_in_any_layer(client, built):
    if built["ca"] is None:
        pytest.skip("built without --ca-cert (no CA bundle on this machine)")
    for image in IMAGES.values():
        out = _run(
            client,
            ["bash", "-c", "find / -xdev -name 'puffer-ca*' 2>/dev/null; ls -A /dev/shm; "
             "env | grep -E '^(PIP_CERT|APT_CONFIG|SSL_CERT_FILE|REQUESTS_CA_BUNDLE|PUFFER_CA_URL)=' || true"],
            image=image,
            environment={"PUFFERTANK_QUIET": "1"},
        )  # fmt: skip
        assert out.strip() == "", f"{image} still holds the CA bundle or its settings:\n{out}"
        # The history names the URL the bundle was served from, never its content.
        history = " ".join(entry.get("CreatedBy", "") for entry in client.api.history(image))
        assert "BEGIN CERTIFICATE" not in history
        assert "PUFFER_CA_URL=http://127.0.0.1:" in history, "the build steps did not get the CA bundle"


def test_building_on_a_missing_layer_says_which_to_build_first(client):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "puffer_core.cli.main",
            "tank",
            "build",
            "--stage",
            "final",
            "--tag",
            "puffertank-absent",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "image puffertank-absent:envs is not on this engine" in proc.stderr
    assert "puffer tank build --stage envs" in proc.stderr


# -- one's own container: puffer tank run / shell, and the lock -------------------------------

HOST_USER = (1234, 1234) if os.getuid() == 0 else (os.getuid(), os.getgid())


def _tank(args: list[str], cwd: pathlib.Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "tank", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PUFFER_DEBUG": ""},
    )


@pytest.fixture
def checkout(tmp_path):
    """A folder owned by the host user the container runs as (as a checkout is its owner's)."""
    folder = tmp_path / "checkout"
    (folder / "sub").mkdir(parents=True)
    for path in (folder, folder / "sub"):
        os.chown(path, *HOST_USER)
    return folder


def test_run_writes_into_the_mount_as_the_host_user(built, checkout):
    uid, gid = HOST_USER
    script = "touch made-inside && mkdir -p new/deeper && echo hi > new/deeper/f && id -u && id -g && pwd && touch ~/ok"
    proc = _tank(
        ["run", "--image", IMAGES["final"], "--mount", str(checkout), "--user", f"{uid}:{gid}", "--network", "none",
         "--quiet", "--", "bash", "-c", script],
        cwd=checkout / "sub",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # The working folder's place in the mount; a HOME the uid (no passwd entry) can write.
    assert proc.stdout.split() == [str(uid), str(gid), "/workspace/sub"]
    for made in (checkout / "sub" / "made-inside", checkout / "sub" / "new" / "deeper" / "f"):
        info = made.stat()
        assert (info.st_uid, info.st_gid) == (uid, gid), made
    assert (checkout / "sub" / "new" / "deeper" / "f").read_text() == "hi\n"


def test_run_streams_output_and_passes_exit_codes(built, checkout):
    proc = _tank(
        ["run", "--image", IMAGES["final"], "--mount", str(checkout), "--network", "none", "--",
         "bash", "-c", "echo to-stdout; echo to-stderr >&2; exit 7"],
    )  # fmt: skip
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout == "to-stdout\n"  # the banner and the message go to stderr
    assert "to-stderr" in proc.stderr and "puffertank: python 3.11" in proc.stderr
    assert _tank(["run", "--image", IMAGES["final"], "--network", "none", "-q", "--", "false"]).returncode == 1
    ok = _tank(["run", "--image", IMAGES["final"], "--network", "none", "-q", "--", "puffer", "envs", "--json"])
    assert ok.returncode == 0 and '"nethack/score"' in ok.stdout, ok.stderr


def test_run_with_a_missing_image_names_the_ones_there(built):
    proc = _tank(["run", "--image", "puffertank-absent:latest", "--", "true"])
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "image puffertank-absent:latest is not on this engine: build it with puffer tank build" in proc.stderr
    assert IMAGES["final"] in proc.stderr


def test_lock_matches_pip_list_inside_the_image(client, built):
    import json

    proc = _tank(["lock", IMAGES["final"], "--json"])
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["python"].startswith("3.11.")
    listed = json.loads(_stdout(client, ["pip", "list", "--format=json"]))
    from puffer_core.tank.image.lock import canonical, lock_digest

    assert record["packages"] == {canonical(p["name"]): p["version"] for p in listed}
    for name in ("puffer-core", "puffer-plugin-nethack", "nle", "ale-py", "gymnasium", "numpy", "pip"):
        assert name in record["packages"], name
    assert record["sha256"] == lock_digest(record["packages"], record["hashes"])
    # The label and the file in the image are one text; the plain output is that text.
    text = _tank(["lock", IMAGES["final"]])
    in_file = _stdout(client, ["cat", "/opt/puffertank/lock.txt"])
    assert text.stdout == in_file
    assert in_file.startswith("# PufferTank lock:") and "Generated by tank/Dockerfile" in in_file
    assert f"lock sha256 {record['sha256']}" in text.stderr


def test_lock_shows_the_hash_of_every_file_the_hash_locked_install_took(client, built):
    """Layer 2 installed the hash-locked set with --require-hashes: every package of the set is
    in the image at the set's version, and the lock's sha256 for it is one the set allows; only
    the checkout's own projects go without one (a directory has no file hash)."""
    import json

    from puffer_core.tank.image.hashlock import load_hashlock

    record = json.loads(_tank(["lock", IMAGES["final"], "--json"]).stdout)
    hashlock = load_hashlock(ROOT / "tank" / "requirements-envs.txt")
    for name, entry in hashlock.entries.items():
        assert record["packages"].get(name) == entry.version, name
        assert record["hashes"][name] in entry.hashes, f"{name}: {record['hashes'][name]} is not in the set"
    unhashed = sorted(set(record["packages"]) - set(record["hashes"]))
    assert unhashed == ["puffer-core", "puffer-plugin-atari", "puffer-plugin-nethack"]
    assert record["hashes"]["pip"] == "sha256:f3b60b20ffaadd4415ed7957212a38ac63fa4c5fa375bd0f4a797777940fad13"
    text = _tank(["lock", IMAGES["final"]]).stdout
    assert f"numpy=={record['packages']['numpy']} --hash={record['hashes']['numpy']}" in text.splitlines()
    # The layer's own history: the set checked against the digest the render names, then installed hashed.
    history = " ".join(entry.get("CreatedBy", "") for entry in client.api.history(IMAGES["envs"]))
    assert f"echo '{hashlock.sha256}  /opt/puffertank/requirements-envs.txt' | sha256sum --check" in history
    assert "pip install --no-cache-dir --require-hashes --no-build-isolation" in history


def test_base_image_is_recorded_by_its_image_id(client, built):
    """The debootstrapped base has no registry digest: the build resolved its tag to the image id,
    built FROM that id, and layer 1, its label and the final lock all name it."""
    image_id = client.images.get(BASE_IMAGE).id
    assert f"base: {BASE_IMAGE} → {image_id} (its image id: a local image has no registry digest)" in built["log"]
    assert client.images.get(IMAGES["base"]).labels["org.puffer.tank.base-image"] == image_id
    assert _stdout(client, ["cat", "/opt/puffertank/base-image.txt"]).strip() == image_id
    assert f"# base-image {image_id}" in _tank(["lock", IMAGES["final"]]).stdout.splitlines()
    # Layers 2 and 3 were built FROM the id of the layer below, not its tag.
    for stage, below in (("envs", "base"), ("final", "envs")):
        below_id = client.images.get(IMAGES[below]).id
        assert f"{stage}: FROM {IMAGES[below]} = {below_id}" in built["log"]


def test_pip_in_the_tank_refuses_a_file_whose_hash_differs(client, built):
    """The tank's pip in hash-checking mode, offline: a locally built wheel installs under its own
    sha256 and is refused under any other, before anything is installed."""
    script = r"""
set -e
mkdir -p /tmp/pkg/tankprobe /tmp/wheels
printf '[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
[project]
name = "tankprobe"
version = "1.0"
' > /tmp/pkg/pyproject.toml
touch /tmp/pkg/tankprobe/__init__.py
pip wheel --quiet --no-deps --no-build-isolation --no-index -w /tmp/wheels /tmp/pkg
good=$(sha256sum /tmp/wheels/tankprobe-1.0-py3-none-any.whl | cut -d' ' -f1)
echo "tankprobe==1.0 --hash=sha256:$(printf '0%.0s' $(seq 64))" > /tmp/bad.txt
echo "tankprobe==1.0 --hash=sha256:$good" > /tmp/good.txt
if pip install --no-cache-dir --require-hashes --no-index --find-links /tmp/wheels -r /tmp/bad.txt \
        >/tmp/out 2>/tmp/err; then
    echo "INSTALLED-UNDER-A-WRONG-HASH"
fi
grep -c "DO NOT MATCH THE HASHES" /tmp/err
python -c "import tankprobe" 2>/dev/null && echo "PRESENT-AFTER-REFUSAL" || true
pip install --quiet --no-cache-dir --require-hashes --no-index --find-links /tmp/wheels -r /tmp/good.txt
python -c "import tankprobe; print('installed-under-its-hash')"
"""
    out = _run(client, ["bash", "-c", script], environment={"PUFFERTANK_QUIET": "1"})
    assert "INSTALLED-UNDER-A-WRONG-HASH" not in out and "PRESENT-AFTER-REFUSAL" not in out, out
    assert out.split()[0] == "1" and "installed-under-its-hash" in out, out


def test_run_containers_have_no_capabilities_and_no_new_privileges(client, built, checkout):
    """`puffer tank run`: docker inspect shows no-new-privileges and every capability dropped, the
    kernel agrees from inside, and the run says whether GPUs were passed and why."""
    inside = _tank(
        ["run", "--image", IMAGES["final"], "--mount", str(checkout), "--network", "none", "--",
         "bash", "-c", "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status; id -u"],
    )  # fmt: skip
    assert inside.returncode == 0, inside.stderr
    status = dict(line.split(":\t", 1) for line in inside.stdout.splitlines() if ":\t" in line)
    assert status == {"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000",
                      "NoNewPrivs": "1"}, inside.stdout  # fmt: skip
    assert inside.stdout.split()[-1] == str(os.getuid())
    # docker's runtimes here have no nvidia: not passed, and why.
    assert "puffertank: GPUs not passed: the engine has no NVIDIA runtime (runtimes: " in inside.stderr
    # A running one, inspected from outside. Found by the label every tank container carries.
    runner = subprocess.Popen(
        [sys.executable, "-m", "puffer_core.cli.main", "tank", "run", "--image", IMAGES["final"],
         "--mount", str(checkout), "--network", "none", "-q", "--", "sleep", "120"],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        found = []
        while not found and time.monotonic() < deadline and runner.poll() is None:
            found = client.containers.list(
                filters={"label": "org.puffer.tank.container=run", "ancestor": IMAGES["final"]}
            )
            time.sleep(0.5)
        assert found, "no running container labelled org.puffer.tank.container=run"
        host_config = found[0].attrs["HostConfig"]
        assert host_config["CapDrop"] == ["ALL"] and not host_config.get("CapAdd")
        assert host_config["SecurityOpt"] == ["no-new-privileges"]
        assert not host_config.get("Privileged")
    finally:
        for container in client.containers.list(filters={"label": "org.puffer.tank.container=run"}):
            container.kill()
        runner.wait(timeout=60)


def test_lock_of_an_image_without_one_says_how_to_get_one(built):
    proc = _tank(["lock", IMAGES["envs"]])
    assert proc.returncode == 1
    assert f"image {IMAGES['envs']} has no lock (label org.puffer.tank.lock)" in proc.stderr


def test_rebuilding_under_the_lock_reproduces_it(client, built, tmp_path):
    """The final layer again, on the first build's environment layer, its pip steps
    constrained by the lock (the build argument changes, so the layer is rebuilt): the same
    packages at the same versions. The base and environment layers take the lock through
    the same script (tank/puffertank-ca.sh); rebuilding them too would add minutes to
    every CI run for no other path."""
    import json

    first = _tank(["lock", IMAGES["final"]])
    assert first.returncode == 0, first.stderr
    lock = tmp_path / "lock.txt"
    lock.write_text(first.stdout)
    tag = f"{TAG}-lock"
    client.images.get(IMAGES["envs"]).tag(tag, "envs")
    command = [
        "build", "--stage", "final", "--tag", tag, "--plugins", "nethack,atari",
        "--no-torch", "--network", "host", "--quiet", "--lock", str(lock),
    ]  # fmt: skip
    if built["ca"]:
        command += ["--ca-cert", built["ca"]]
    proc = _tank(command, timeout=3600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    again = json.loads(_tank(["lock", f"{tag}:latest", "--json"]).stdout)
    before = json.loads(_tank(["lock", IMAGES["final"], "--json"]).stdout)
    assert again["packages"] == before["packages"] and again["hashes"] == before["hashes"]
    history = " ".join(entry.get("CreatedBy", "") for entry in client.api.history(f"{tag}:latest"))
    assert "PUFFER_LOCK_URL=http://127.0.0.1:" in history, "the final layer's build steps did not get the lock"
