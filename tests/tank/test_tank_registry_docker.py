"""Images from a registry, for real: PufferTank pushed to Debian's `docker-registry` on 127.0.0.1,
pulled on a second Docker engine ("another box", with an empty image store), checked, run;
its lock digest the same on both; a tag whose image does not match refused and removed; a
registry that is not there, a missing tag and a refused login each one line; `build
--from-registry` on the other box taking all three layers instead of building them.

Needs what tests/tank/test_tank_docker.py needs (tank/ci-setup.sh) and the `docker-registry`
package (ci-setup.sh installs it). The push and the other box's pull move the whole image
(about 2 GB unpacked); the times are printed (pytest -s).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest
from docker_tank import BASE_IMAGE, IMAGES, ROOT, TAG, build_tank, unavailable

from puffer_core.bench.scratch_docker import REGISTRY_BINARY, free_port, start_engine, start_registry
from puffer_core.tank.image.inputs import BELOW_LABEL, INPUTS_LABEL
from puffer_core.tank.image.lock import LOCK_LABEL
from puffer_core.tank.registry.pins import LayerPin, Pins, write_pins

pytestmark = [pytest.mark.docker, pytest.mark.slow]

NAME = "puffertank"  # the repository in the test registry
LOCAL = "puffertank-reg-test"  # every local tag these tests make starts with it
OTHER = hashlib.sha256(b"some other environment").hexdigest()


def _puffer(*args: str, env: dict[str, str] | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "tank", *args],
        cwd=ROOT,
        env={**os.environ, "PUFFER_DEBUG": "", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _docker(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["docker", *args], env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=600
    )
    assert not check or proc.returncode == 0, proc.stderr
    return proc


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr
    # notes about the caller's environment (a file:// pip index left out of the build) may come first
    lines = [line for line in proc.stderr.strip().splitlines() if not line.startswith("note: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def _error_after_progress(proc: subprocess.CompletedProcess) -> str:
    """The one error line that ends the output of a transfer that began (its progress lines come first)."""
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def _tags(engine_env: dict[str, str] | None = None) -> set[str]:
    out = _docker("images", "--format", "{{.Repository}}:{{.Tag}}", env=engine_env).stdout
    return {tag for tag in out.split() if not tag.endswith(":<none>")}  # <none>: known by its digest only


def _digest_references(engine_env: dict[str, str] | None = None) -> set[str]:
    """``REPO@sha256:…`` the engine keeps: a push records one on the image it pushed."""
    out = _docker("images", "--digests", "--format", "{{.Repository}}@{{.Digest}}", env=engine_env).stdout
    return {ref for ref in out.split() if not ref.endswith("@<none>")}


@pytest.fixture(scope="module")
def registry():
    if not os.path.exists(REGISTRY_BINARY):
        unavailable(f"{REGISTRY_BINARY} is missing (apt-get install docker-registry)")
    started = start_registry()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def box2(client):
    """Another box: a second engine with an empty image store."""
    engine = start_engine()
    yield engine
    engine.stop()


@pytest.fixture(scope="module", autouse=True)
def _untag_ours(client, registry):
    """Leave the first engine as it was: remove every tag these tests made, and the digest
    references their pushes recorded (the images the `built` fixture tagged stay, so this only
    untags them)."""
    yield
    for tag in _tags():
        if tag.startswith((LOCAL, registry.address)):
            _docker("rmi", tag, check=False)
    for ref in _digest_references():
        if ref.startswith(registry.address + "/"):
            _docker("rmi", ref, check=False)


@pytest.fixture(scope="module")
def pins_dir():
    folder = tempfile.mkdtemp(prefix="puffertank-pins-")
    yield folder
    subprocess.run(["rm", "-rf", folder], check=False)


@pytest.fixture(scope="module")
def pushed(built, registry, pins_dir):
    ref = f"{registry.address}/{NAME}"
    pins = os.path.join(pins_dir, "ci.json")
    started = time.monotonic()
    proc = _puffer("push", IMAGES["final"], "--registry", ref, "--pins", pins)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    print(f"\npuffer tank push {IMAGES['final']} to an empty registry: {seconds:.1f} s")
    lock = json.loads(_puffer("lock", IMAGES["final"], "--json").stdout)
    with open(pins) as file:
        pinned = json.load(file)
    return {"ref": ref, "log": proc.stderr, "seconds": seconds, "digest": lock["sha256"], "pins": pins,
            "pinned": pinned}  # fmt: skip


@pytest.fixture(scope="module")
def pulled(box2, pushed):
    started = time.monotonic()
    proc = _puffer("pull", "--pins", pushed["pins"], "--tag", f"{LOCAL}:latest", env=box2.env())
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    print(f"\npuffer tank pull --pins on an engine with no layer of it: {seconds:.1f} s")
    return {"log": proc.stderr, "seconds": seconds}


def test_push_prints_each_layer_by_its_digest_and_writes_the_pins(client, registry, pushed):
    digest, ref, pinned = pushed["digest"], pushed["ref"], pushed["pinned"]
    assert ": Pushed" in pushed["log"]  # a line per layer
    expected = {f"lock-{digest}", f"lock-{digest}-envs", f"lock-{digest}-base", "latest", "latest-envs", "latest-base"}
    assert set(registry.tags(NAME)) == expected  # tags to browse; no inputs- tag to plant a layer under
    for stage, tag in (("final", f"lock-{digest}"), ("envs", f"lock-{digest}-envs"), ("base", f"lock-{digest}-base")):
        manifest = registry.manifest_digest(NAME, tag)
        layer = client.images.get(IMAGES[stage])
        assert f"{stage}: {ref}@{manifest}" in pushed["log"]
        assert pinned["layers"][stage] == {
            "ref": f"{ref}@{manifest}", "digest": manifest, "id": layer.id, "inputs": layer.labels[INPUTS_LABEL]
        }  # fmt: skip
    assert pinned["lock"] == digest and pinned["registry"] == ref and pinned["generated_by"].startswith("puffer tank")
    final = pinned["layers"]["final"]["ref"]
    assert (
        f"pushed {IMAGES['final']} to {ref} in " in pushed["log"]
        and f": {final} (lock sha256 {digest})" in (pushed["log"])
    )
    assert f"elsewhere: puffer tank pull --pins {pushed['pins']}" in pushed["log"]
    # The layers were found from the final image's labels, and the registry's names left the box.
    assert client.images.get(IMAGES["final"]).labels[BELOW_LABEL] == client.images.get(IMAGES["envs"]).id
    assert not [tag for tag in _tags() if tag.startswith(registry.address)]
    # Again, with the JSON summary: every layer is already there, the same digests.
    started = time.monotonic()
    again = _puffer("push", IMAGES["final"], "--registry", ref, "--json")
    print(f"\npuffer tank push again (every layer there): {time.monotonic() - started:.1f} s")
    assert again.returncode == 0, again.stderr
    record = json.loads(again.stdout)
    assert record["digest"] == digest and record["registry"] == ref
    assert record["pins"] == {stage: pinned["layers"][stage]["ref"] for stage in ("base", "envs", "final")}
    assert record["layers"] == {stage: client.images.get(IMAGES[stage]).id for stage in ("base", "envs", "final")}
    assert set(record["tags"]) == {f"{ref}:{tag}" for tag in registry.tags(NAME)}


def test_pull_by_pins_on_another_box_is_verified_and_runs(client, box2, pushed, pulled):
    digest, env = pushed["digest"], box2.env()
    final = pushed["pinned"]["layers"]["final"]["ref"]
    assert "Pull complete" in pulled["log"]
    assert f"pulled {final} as {LOCAL}:latest" in pulled["log"]
    assert f"verified, every byte checked against its digest; lock sha256 {digest}" in pulled["log"]
    # The image id survives the trip: the same config, so the same id on both engines.
    there = json.loads(_puffer("lock", f"{LOCAL}:latest", "--json", env=env).stdout)
    assert there["id"] == client.images.get(IMAGES["final"]).id
    assert there["sha256"] == digest
    here, other = _puffer("lock", IMAGES["final"]), _puffer("lock", f"{LOCAL}:latest", env=env)
    assert f"lock sha256 {digest}" in here.stderr and f"lock sha256 {digest}" in other.stderr
    assert here.stdout == other.stdout
    assert _tags(env) == {f"{LOCAL}:latest"}  # a digest pull leaves no registry tag behind
    run = _puffer("run", "--image", f"{LOCAL}:latest", "--network", "none", "-q", "--", "puffer", "envs", "--json",
                  env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert '"nethack/score"' in run.stdout and '"atari/breakout"' in run.stdout
    # The digest alone, as push printed it, does the same; --json says it was verified.
    proc = _puffer("pull", final, "--tag", f"{LOCAL}:by-digest", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["verified"] is True and record["pulled"] == final and record["digest"] == digest
    assert record["id"] == there["id"] and record["image"] == f"{LOCAL}:by-digest"
    _docker("rmi", f"{LOCAL}:by-digest", env=env)


def test_a_pull_by_tag_says_unverified_and_names_nothing_of_the_box(box2, pushed, pulled):
    env = box2.env()
    before = _docker("image", "inspect", "--format", "{{.Id}}", f"{LOCAL}:latest", env=env).stdout
    proc = _puffer("pull", "--registry", pushed["ref"], "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["verified"] is False and record["pulled"] == record["image"] == f"{pushed['ref']}:latest"
    assert record["served"] == pushed["pinned"]["layers"]["final"]["ref"]  # what to compare with push's output
    plain = _puffer("pull", "--registry", pushed["ref"], env=env)
    assert (
        "unverified" in plain.stderr
        and "(checked)" not in plain.stderr
        and "verified, every byte" not in (plain.stderr)
    )
    assert f"is not this box's image. The registry served {record['served']}" in " ".join(plain.stderr.split())
    assert _docker("image", "inspect", "--format", "{{.Id}}", f"{LOCAL}:latest", env=env).stdout == before
    _docker("rmi", f"{pushed['ref']}:latest", env=env)


@pytest.mark.parametrize("pushed_as", ["another lock", "no lock"])
def test_a_tag_that_contradicts_its_image_is_refused(client, pushed, pushed_as):
    """Tagged by hand under another lock digest (`docker tag` + `docker push`): pulled, checked, removed."""
    ref, digest = pushed["ref"], pushed["digest"]
    image, claimed = (IMAGES["final"], OTHER) if pushed_as == "another lock" else (IMAGES["envs"], OTHER[::-1])
    wrong = f"{ref}:lock-{claimed}"
    _docker("tag", image, wrong)
    _docker("push", wrong)
    _docker("rmi", wrong)
    proc = _puffer("pull", "--registry", ref, "--lock", claimed)
    line = _error_after_progress(proc)
    if pushed_as == "another lock":
        assert f"{wrong} is refused: its lock digest is {digest}, not {claimed} as its tag says" in line
    else:
        assert f"{wrong} is refused: {wrong} has no lock (label {LOCK_LABEL})" in line
    assert line.endswith("it was removed from this engine")
    assert wrong not in _tags()


def test_a_missing_tag_is_one_line_naming_it(pushed):
    absent = hashlib.sha256(b"never pushed").hexdigest()
    line = _one_line_error(_puffer("pull", "--registry", pushed["ref"], "--lock", absent))
    assert f"the registry has no {pushed['ref']}:lock-{absent}" in line
    line = _one_line_error(_puffer("pull", "--registry", pushed["ref"].replace(NAME, "nothing-here")))
    assert "the registry has no " in line and "nothing-here:latest" in line


def test_a_registry_that_is_not_there_is_one_line_within_seconds(built, pins_dir):
    port = free_port()
    pins = os.path.join(pins_dir, "nowhere.json")
    write_pins(pins, Pins(f"127.0.0.1:{port}/{NAME}", TAG, OTHER, {"final": LayerPin(
        f"127.0.0.1:{port}/{NAME}", "sha256:" + OTHER, "sha256:" + OTHER, OTHER)}))  # fmt: skip
    for args in (
        ["push", IMAGES["final"]],
        ["pull"],
        ["build", "--stage", "final", "--tag", TAG, "--plugins", "nethack,atari", "--no-constraints", "--pins", pins],
    ):
        flag = "--from-registry" if args[0] == "build" else "--registry"
        started = time.monotonic()
        line = _one_line_error(_puffer(*args, flag, f"127.0.0.1:{port}/{NAME}"))
        assert time.monotonic() - started < 30
        assert (
            f"registry 127.0.0.1:{port} is not there: nothing listens at 127.0.0.1:{port} (connection refused)" in line
        )
    with socket.socket() as silent:  # accepts connections, never answers (the engine alone waits 25 s)
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        line = _one_line_error(_puffer("pull", "--registry", f"{address}/{NAME}"))
        assert time.monotonic() - started < 30
        assert f"registry {address} is not there: {address} did not answer within 10 s" in line


def test_build_from_registry_on_another_box_builds_nothing(client, box2, registry, pushed, pulled):
    """The other box has the checkout and the base image, not the layers: every layer is taken
    from the registry (same inputs, same image ids), none is built."""
    env = box2.env()
    debian = f"{registry.address}/puffertank-debian:bookworm"
    _docker("tag", BASE_IMAGE, debian)
    _docker("push", debian)
    _docker("rmi", debian)
    _docker("pull", debian, env=env)
    _docker("tag", debian, BASE_IMAGE, env=env)
    _docker("rmi", debian, env=env)
    started = time.monotonic()
    extra = ["--from-registry", pushed["ref"], "--pins", pushed["pins"]]
    log = build_tank(tag=f"{LOCAL}-build", extra=extra, env=env)["log"]
    print(f"\npuffer tank build --from-registry on the other box: {time.monotonic() - started:.1f} s")
    for stage in ("base", "envs", "final"):
        pinned = pushed["pinned"]["layers"][stage]["ref"]
        assert f"{stage}: reused {pinned} (pinned in {pushed['pins']}, verified by its digest)" in log, log
        assert client.images.get(IMAGES[stage]).id in _docker("image", "inspect", "--format", "{{.Id}}",
                                                            f"{LOCAL}-build:{stage if stage != 'final' else 'latest'}",
                                                            env=env).stdout  # fmt: skip
    assert "Step 1/" not in log and "pins no layer built from these inputs" not in log
    lock = _puffer("lock", f"{LOCAL}-build:latest", env=env)
    assert f"lock sha256 {pushed['digest']}" in lock.stderr


def test_build_from_registry_builds_a_layer_the_registry_does_not_have(client, pushed):
    """Another --build-arg makes other inputs: the registry has no such final layer, so it is built
    (from the engine's cache here: an argument no step declares changes no step)."""
    _docker("tag", IMAGES["envs"], f"{LOCAL}-miss:envs")
    extra = ["--stage", "final", "--build-arg", "PUFFER_REGISTRY_TEST=1", "--from-registry", pushed["ref"]]
    log = build_tank(tag=f"{LOCAL}-miss", extra=[*extra, "--pins", pushed["pins"]])["log"]
    assert f"final: {pushed['pins']} pins no layer built from these inputs (" in log
    assert "Step 1/" in log and "reused" not in log
    built_labels = client.images.get(f"{LOCAL}-miss:latest").labels
    assert built_labels[INPUTS_LABEL] != client.images.get(IMAGES["final"]).labels[INPUTS_LABEL]
    assert built_labels[BELOW_LABEL] == client.images.get(IMAGES["envs"]).id


def _tiny_tank(client, tag: str, who: bytes | None = None, inputs: str | None = None) -> None:
    """Three layers on the Debian base that add no files but ``/who`` (``who``, in the final layer):
    a final image with the CI image's lock, each naming the one below, for pushes that move only
    the base's 120 MB. Two of them with other ``who`` carry the very same labels (``inputs``: the
    final layer's inputs label, by default a tiny one of its own)."""
    lock = client.images.get(IMAGES["final"]).labels[LOCK_LABEL]
    below = client.images.get(BASE_IMAGE).id
    for stage, labels in (("base", {}), ("envs", {}), ("latest", {LOCK_LABEL: lock})):
        labels = {**labels, INPUTS_LABEL: hashlib.sha256(f"tiny {stage}".encode()).hexdigest()}
        if stage == "latest" and inputs is not None:
            labels[INPUTS_LABEL] = inputs
        if stage != "base":
            labels[BELOW_LABEL] = below
        files = {"Dockerfile": f"FROM {below}\n".encode()}
        if stage == "latest" and who is not None:
            files = {"Dockerfile": f"FROM {below}\nCOPY who /who\n".encode(), "who": who}
        image, _ = client.images.build(
            fileobj=_context(files), custom_context=True, tag=f"{tag}:{stage}", labels=labels, rm=True
        )
        below = image.id


def _context(files: dict[str, bytes]) -> io.BytesIO:
    """A build context: a tar of ``files``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def _who(image: str, env: dict[str, str]) -> str:
    """What ``/who`` says in ``image`` (on the engine ``env`` names)."""
    return _docker("run", "--rm", "--network", "none", "--", image, "cat", "/who", env=env).stdout


def _drop(tags: list[str], env: dict[str, str] | None = None) -> None:
    for tag in tags:
        _docker("rmi", tag, env=env, check=False)


def test_push_and_pull_use_dockers_login(client, box2, built):
    """A registry with a login: refused (one line naming `docker login`) until `docker login`
    stored the credentials, which the push and the pull then use."""
    import bcrypt  # what the registry's htpasswd takes (the dev extra has it: crypt left Python in 3.13)

    hashed = bcrypt.hashpw(b"tank-secret", bcrypt.gensalt(rounds=4)).decode()
    locked = start_registry(htpasswd=f"puffer:{hashed}\n")
    config = tempfile.mkdtemp(prefix="puffertank-docker-config-")
    try:
        ref = f"{locked.address}/tiny"
        _tiny_tank(client, f"{LOCAL}-tiny")
        env = {"DOCKER_CONFIG": config}
        line = _error_after_progress(_puffer("push", f"{LOCAL}-tiny:latest", "--registry", ref, env=env))
        assert "no basic auth credentials" in line or "unauthorized" in line, line
        assert line.endswith(f"log in first: docker login {locked.address}")
        assert not [tag for tag in _tags() if tag.startswith(locked.address)]  # the push's tags, taken back
        login = subprocess.run(
            ["docker", "--config", config, "login", "-u", "puffer", "--password-stdin", locked.address],
            input="tank-secret\n", capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert login.returncode == 0, login.stderr
        pushed = _puffer("push", f"{LOCAL}-tiny:latest", "--registry", ref, "--json", env=env)
        assert pushed.returncode == 0, pushed.stderr
        pinned = json.loads(pushed.stdout)["pins"]["final"]
        refused = _puffer("pull", pinned, "--tag", f"{LOCAL}:tiny", env=box2.env())  # no login on the other box
        assert _one_line_error(refused).endswith(f"log in first: docker login {locked.address}")
        pull = _puffer("pull", pinned, "--tag", f"{LOCAL}:tiny", env={**env, **box2.env()})
        assert pull.returncode == 0, pull.stderr
        _docker("rmi", f"{LOCAL}:tiny", env=box2.env())
    finally:
        for stage in ("latest", "envs", "base"):
            _docker("rmi", f"{LOCAL}-tiny:{stage}", check=False)
        locked.stop()
        subprocess.run(["rm", "-rf", config], check=False)


def test_two_images_with_the_same_labels_pushed_over_each_other(client, box2, registry, pins_dir):
    """The attack: a second image with the first's labels, pushed over its tags. A pull by the
    first's digest (or its pins) gets the first's files; a pull by tag gets the second's, says
    unverified, and leaves the box's image (puffertank:latest here) as it was."""
    ref, env = f"{registry.address}/same-labels", box2.env()
    first, second, pins = f"{LOCAL}-first", f"{LOCAL}-second", os.path.join(pins_dir, "first.json")
    _tiny_tank(client, first, b"first\n")
    _tiny_tank(client, second, b"second\n")
    made = [f"{name}:{stage}" for name in (first, second) for stage in ("latest", "envs", "base")]
    box = ["puffertank:latest", f"{ref}:latest", f"{LOCAL}:first-by-pins"]
    try:
        assert _puffer("push", f"{first}:latest", "--registry", ref, "--pins", pins).returncode == 0
        with open(pins) as file:
            pinned = json.load(file)["layers"]["final"]["ref"]
        overwrite = _puffer("push", f"{second}:latest", "--registry", ref, "--json")
        assert overwrite.returncode == 0, overwrite.stderr
        assert (
            json.loads(overwrite.stdout)["digest"]
            == json.loads(_puffer("lock", f"{first}:latest", "--json").stdout)["sha256"]
        )  # the same lock label: the same lock-<sha256> tag, now the second's
        by_digest = _puffer("pull", pinned, env=env)  # the box's image, puffertank:latest
        assert by_digest.returncode == 0, by_digest.stderr
        assert "verified, every byte checked" in by_digest.stderr and _who("puffertank:latest", env) == "first\n"
        box_id = _docker("image", "inspect", "--format", "{{.Id}}", "puffertank:latest", env=env).stdout
        by_tag = _puffer("pull", "--registry", ref, env=env)
        assert by_tag.returncode == 0, by_tag.stderr
        assert "unverified" in by_tag.stderr and "checked" not in by_tag.stderr
        assert _who(f"{ref}:latest", env) == "second\n"  # what the tag holds now, kept under its own name to look at
        assert _docker("image", "inspect", "--format", "{{.Id}}", "puffertank:latest", env=env).stdout == box_id
        assert _who("puffertank:latest", env) == "first\n"
        assert _puffer("pull", "--pins", pins, "--tag", f"{LOCAL}:first-by-pins", env=env).returncode == 0
        assert _who(f"{LOCAL}:first-by-pins", env) == "first\n"
    finally:
        _drop(made)
        _drop(box, env)


def test_a_planted_layer_is_never_reused(client, registry, pushed, pins_dir):
    """Anyone who can push can compute a layer's inputs fingerprint from the public checkout and
    push an image labelled with it (as the old inputs-<sha256> tag). Build --from-registry takes
    only what the pins give: with the CI image's pins, its own final layer, by digest; with pins
    that do not map these inputs, none: the layer is built."""
    ref, fingerprint = pushed["ref"], client.images.get(IMAGES["final"]).labels[INPUTS_LABEL]
    planted = f"{LOCAL}-planted"
    _tiny_tank(client, planted, b"planted\n", inputs=fingerprint)
    made = [f"{planted}:{stage}" for stage in ("latest", "envs", "base")]
    _docker("tag", f"{planted}:latest", f"{ref}:inputs-{fingerprint}")
    _docker("push", f"{ref}:inputs-{fingerprint}")
    _docker("rmi", f"{ref}:inputs-{fingerprint}")
    # The admin's pins of another image (its own inputs): they do not map the planted fingerprint.
    other, foreign = f"{LOCAL}-other", os.path.join(pins_dir, "foreign.json")
    _tiny_tank(client, other, b"other\n")
    made += [f"{other}:{stage}" for stage in ("latest", "envs", "base")]
    assert (
        _puffer("push", f"{other}:latest", "--registry", f"{registry.address}/other", "--pins", foreign).returncode == 0
    )
    _docker("tag", IMAGES["envs"], f"{LOCAL}-plant:envs")
    made += [f"{LOCAL}-plant:envs", f"{LOCAL}-plant:latest"]
    try:
        extra = ["--stage", "final", "--from-registry", ref]
        log = build_tank(tag=f"{LOCAL}-plant", extra=[*extra, "--pins", pushed["pins"]])["log"]
        assert f"final: reused {pushed['pinned']['layers']['final']['ref']} (pinned in" in log
        assert client.images.get(f"{LOCAL}-plant:latest").id == client.images.get(IMAGES["final"]).id
        log = build_tank(tag=f"{LOCAL}-plant", extra=[*extra, "--pins", foreign])["log"]
        assert f"final: {foreign} pins no layer built from these inputs" in log and "reused" not in log
        assert client.images.get(f"{LOCAL}-plant:latest").id != client.images.get(f"{planted}:latest").id
    finally:
        _drop(made)
