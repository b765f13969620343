"""puffer_core.train.runs and the decisions of `puffer runs resume --auto`, without torch: the
records, who is alive, once per boot, the crash loop. tests/cli/test_cli_runs.py runs them for real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from puffer_core.cli import runs as runs_cli
from puffer_core.train import runs


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "puffer" / "runs"


def _record(out, **fields) -> dict:
    def change(data):
        data.update(fields)

    return runs.update(out, change)


def test_a_record_is_written_whole_under_the_users_home(registry, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    data = _record(out, env="classic/cartpole", state="finished")
    path = runs.record_path(out)
    assert path.parent == registry and json.loads(path.read_text()) == data
    assert registry.stat().st_mode & 0o777 == 0o700  # private: nobody else reads or plants records
    assert runs.record_path(str(out) + "/") == path == runs.record_path(tmp_path / "." / "run")
    assert [record.out for record in runs.read_all()] == [str(out.resolve())]
    assert not [name for name in os.listdir(registry) if name.startswith(".")]  # no temporary left


def test_records_of_folders_gone_and_broken_records_are_left_out(registry, tmp_path):
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    kept.mkdir()
    gone.mkdir()
    _record(kept, state="finished")
    _record(gone, state="finished")
    gone.rmdir()
    (registry / "broken.json").write_text("{not json")
    (registry / "deep.json").write_text("[" * 100_000)
    with pytest.warns(RuntimeWarning) as warned:
        assert [record.out for record in runs.read_all()] == [str(kept)]
    said = sorted(str(warning.message) for warning in warned)
    assert said[0].startswith(f"{registry / 'broken.json'}: Expecting property name") and "nested too deeply" in said[1]


def _bad_records(registry, tmp_path) -> dict[str, str]:
    """What a user (or a copied folder) can leave in a registry, and what reading it must say."""
    out = tmp_path / "run"
    out.mkdir(exist_ok=True)
    _record(out, state="finished")
    good = json.loads(runs.record_path(out).read_text())
    (registry / "heartbeat.json").write_text(json.dumps({**good, "heartbeat": "x"}))
    (registry / "started.json").write_text(json.dumps({**good, "started": [1]}))
    (registry / "args.json").write_text(json.dumps({**good, "resume_args": ["--steps", 5]}))
    os.mkfifo(registry / "fifo.json")  # an open() of it would wait for a writer forever
    (registry / "link.json").symlink_to(runs.record_path(out))
    return {
        "heartbeat.json": 'its heartbeat is "x", not a int or float or NoneType',
        "started.json": "its started is [1], not a int or float or NoneType",
        "args.json": "its resume_args are not words",
        "fifo.json": "a FIFO",
        "link.json": "a symbolic link, not followed",
    }


def test_a_record_that_is_no_record_is_named_and_skipped_never_followed_or_waited_on(registry, tmp_path):
    expected = _bad_records(registry, tmp_path)
    problems: list[str] = []
    found = runs.read_all(problems=problems)
    assert [record.out for record in found] == [str(tmp_path / "run")]
    assert sorted(problems) == sorted(f"{registry / name}: {why}" for name, why in expected.items())


def test_root_reads_a_users_records_only_when_they_are_the_users(registry, tmp_path):
    from puffer_core.atomic import open_directory_below

    _bad_records(registry, tmp_path)
    home = tmp_path / "state"  # the registry is home/puffer/runs here
    fd = open_directory_below(home, ("puffer", "runs"))
    problems: list[str] = []
    try:
        assert len(runs.scan(registry, fd, owner=os.geteuid(), problems=problems)) == 1
        assert runs.scan(registry, fd, owner=os.geteuid() + 1, problems=[]) == []  # someone else's files
    finally:
        os.close(fd)
    assert len(problems) == 5
    (tmp_path / "elsewhere").mkdir()
    (home / "puffer").rename(tmp_path / "elsewhere" / "puffer")
    (home / "puffer").symlink_to(tmp_path / "elsewhere" / "puffer")  # a link on the way: not followed either
    with pytest.raises(OSError, match="a symbolic link, not followed"):
        open_directory_below(home, ("puffer", "runs"))


def test_a_run_that_connects_to_a_ray_head_is_not_resumed_by_itself(registry, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    assert runs_cli.ray_head(["--steps", "10", "--ray-address", "10.0.0.11:6379"]) == "10.0.0.11:6379"
    assert runs_cli.ray_head(["--ray-address=auto"]) == "auto"
    assert runs_cli.ray_head(["--set", "ray_address=10.0.0.11:6379", "--set", "lr=0.1"]) == "10.0.0.11:6379"
    assert runs_cli.ray_head(["--set", "lr=0.1", "--backend", "ray"]) is None  # a Ray of its own: resumed
    record = _interrupted(out, resume_args=["--backend", "ray", "--ray-address", "10.0.0.11:6379"])
    why = runs_cli._auto_decision(record, runs.boot_key())
    assert "connects to the Ray head 10.0.0.11:6379" in why and f"puffer runs resume {out}" in why
    assert runs.read(out)["not_resumed"] == why  # puffer runs shows why
    row = runs_cli._row(runs.read_all()[0], time.time())
    assert row["state"] == "interrupted" and row["not_resumed"] == why


def test_a_process_is_its_pid_and_start_time(registry):
    me = {
        "place": runs.place(),
        "boot": runs.boot_key(),
        "pid": os.getpid(),
        "pid_start": runs.process_start(os.getpid()),
    }
    assert runs.process_alive(me) is True
    assert runs.process_alive({**me, "pid_start": me["pid_start"] - 1}) is False  # the pid, reused by another
    assert runs.process_alive({**me, "boot": "another boot"}) is False
    assert runs.process_alive({**me, "place": "another-box/puffertank-alice"}) is None  # cannot tell from here
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert runs.process_alive({**me, "pid": gone.pid}) is False


def test_a_running_record_whose_process_vanished_reads_interrupted(registry, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    alive = {
        "place": runs.place(),
        "boot": runs.boot_key(),
        "pid": os.getpid(),
        "pid_start": runs.process_start(os.getpid()),
    }
    _record(out, state="running", **alive)
    assert runs.read_all()[0].state == "running"
    _record(out, boot="a boot before a crash")
    assert runs.read_all()[0].state == "interrupted"
    _record(out, place="elsewhere")
    record = runs.read_all()[0]
    assert (record.state, record.alive) == ("running", None)


def test_the_options_a_detached_run_is_given_again():
    import click
    from click.testing import CliRunner

    seen = {}

    @click.command()
    @click.argument("env", required=False)
    @click.option("--steps", type=int)
    @click.option("--set", "settings", multiple=True)
    @click.option("--json", "as_json", is_flag=True)
    @click.option("--seed", type=int, default=0)
    @click.pass_context
    def command(ctx, env, steps, settings, as_json, seed):
        seen["words"] = runs_cli.given_options(ctx, {"as_json"})

    CliRunner().invoke(command, ["x", "--steps", "1000", "--set", "a=1", "--set", "b=2", "--json"])
    assert seen["words"] == ["--steps", "1000", "--set", "a=1", "--set", "b=2"]  # no default, no skipped option


def _interrupted(out, **fields) -> runs.RunRecord:
    base = {"state": "running", "place": runs.place(), "boot": "a boot before", "pid": 1, "pid_start": 0}
    data = _record(out, **{**base, "detached": True, "auto_resume": True, **fields})
    return runs.RunRecord(runs.record_path(out), data, "interrupted", False)


def test_auto_resume_is_once_per_boot_and_only_for_runs_that_asked(registry, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    boot = runs.boot_key()
    assert runs_cli._auto_decision(_interrupted(out), boot) is None
    record = _interrupted(
        out, resumes=[{"boot": boot, "time": time.time() - 3600, "auto": True}], heartbeat=time.time()
    )
    assert "resumed once in this boot already" in runs_cli._auto_decision(record, boot)
    record = _interrupted(out, resumes=[], auto_resume=False)
    assert "did not ask to resume by itself" in runs_cli._auto_decision(record, boot)


def test_a_crash_loop_is_given_up_on_and_says_why(registry, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    now = time.time()
    for failures in (1, 2):  # each resume died within a minute: no sign of life after it
        record = _interrupted(out, resumes=[{"boot": f"boot {failures}", "time": now}], heartbeat=now - 5,
                              auto_resume=True, error="policy.pt is not a checkpoint")  # fmt: skip
        assert runs_cli._auto_decision(record, f"boot {failures + 1}") is None
        assert runs.read(out)["quick_failures"] == failures
    record = _interrupted(out, resumes=[{"boot": "boot 3", "time": now}], heartbeat=now - 5)
    why = runs_cli._auto_decision(record, "boot 4")
    assert why.startswith("gave up: interrupted again within a minute of its resume 3 times in a row")
    assert "policy.pt is not a checkpoint" in why
    data = runs.read(out)
    assert data["state"] == "gave-up" and "resume it by hand once fixed" in data["error"]
    # A run that lived past the minute after its resume starts the count again.
    record = _interrupted(out, resumes=[{"boot": "boot 5", "time": now - 600}], heartbeat=now - 60, quick_failures=2)
    assert runs_cli._auto_decision(record, "boot 6") is None and runs.read(out)["quick_failures"] == 0


def test_resuming_a_copied_run_folder_never_writes_through_its_log_link(registry, tmp_path):
    """A run folder copied from someone else whose train.log is a link to the victim's ~/.bashrc:
    `puffer runs resume` refuses in one line and appends nothing there (nothing starts)."""
    from click.testing import CliRunner

    from puffer_core.cli.main import cli

    victim = tmp_path / "bashrc"
    victim.write_text("# the victim's\n")
    copied = tmp_path / "copied-run"
    copied.mkdir()
    (copied / "policy.pt").write_bytes(b"a checkpoint")
    (copied / "train.log").symlink_to(victim)
    result = CliRunner().invoke(cli, ["runs", "resume", str(copied)])
    assert result.exit_code == 1, result.output
    assert f"{copied / 'train.log'} is a symbolic link, not followed" in result.output
    assert victim.read_text() == "# the victim's\n"
    assert runs.read(copied) is None  # no record of a run that never started


def _run_folder(tmp_path, name: str, **fields) -> object:
    out = tmp_path / name
    out.mkdir()
    (out / "policy.pt").write_bytes(b"weights")
    _record(out, env="classic/probe_1", **fields)
    return out


def _puffer(*args: str):
    from click.testing import CliRunner

    from puffer_core.cli.main import cli

    return CliRunner().invoke(cli, list(args))


def test_runs_rm_forgets_a_run_and_keeps_its_folder_unless_files(registry, tmp_path):
    kept, gone = _run_folder(tmp_path, "kept", state="finished"), _run_folder(tmp_path, "gone", state="failed")
    result = _puffer("runs", "rm", str(kept))
    assert result.exit_code == 0 and f"forgot {kept} (finished)" in result.output, result.output
    assert kept.is_dir() and runs.read(kept) is None
    result = _puffer("runs", "rm", "--files", str(gone))
    assert result.exit_code == 0 and "and deleted its folder" in result.output and not gone.exists()
    assert runs.read_all() == []
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    result = _puffer("runs", "rm", str(stranger))
    assert result.exit_code == 1 and "is not one of your runs on this box" in result.output


def test_runs_rm_refuses_a_running_run_and_a_folder_that_holds_no_run(registry, tmp_path):
    me = {
        "place": runs.place(),
        "boot": runs.boot_key(),
        "pid": os.getpid(),
        "pid_start": runs.process_start(os.getpid()),
    }
    running = _run_folder(tmp_path, "running", state="running", **me)
    result = _puffer("runs", "rm", "--files", str(running))
    assert result.exit_code == 1 and f"is running (pid {os.getpid()}): puffer runs stop" in result.output
    assert running.is_dir() and runs.read(running) is not None
    odd = _run_folder(tmp_path, "odd", state="finished")
    (odd / "policy.pt").unlink()  # a record that names a folder of something else now
    (odd / "thesis.tex").write_text("mine")
    result = _puffer("runs", "rm", "--files", str(odd))
    assert result.exit_code == 1 and "holds no run's files" in result.output and (odd / "thesis.tex").exists()


def test_runs_prune_forgets_ended_runs_by_kind_and_records_of_folders_gone(registry, tmp_path):
    finished = _run_folder(tmp_path, "finished", state="finished")
    failed = _run_folder(tmp_path, "failed", state="failed")
    gave_up = _run_folder(tmp_path, "gave-up", state="gave-up")
    interrupted = _run_folder(tmp_path, "interrupted", state="running", boot="a boot before", pid=1, pid_start=0)
    vanished = _run_folder(tmp_path, "vanished", state="finished")
    shutil.rmtree(vanished)
    result = _puffer("runs", "prune", "--failed")
    assert result.exit_code == 0, result.output
    assert runs.read(failed) is None and runs.read(gave_up) is None and runs.read(finished) is not None
    assert f"forgot {vanished} (its folder is gone)" in result.output and runs.read(vanished) is None
    result = _puffer("runs", "prune")
    assert f"forgot {finished} (finished)" in result.output and runs.read(finished) is None
    assert runs.read(interrupted) is not None  # an interrupted run is not ended: it can be resumed
    assert all(path.is_dir() for path in (finished, failed, gave_up))  # no --files: folders stay
    assert "nothing to forget" in _puffer("runs", "prune", "--finished").output


def test_the_first_update_beats_with_its_steps_per_second_and_runs_shows_the_time_left(registry, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    registration = runs.Registration(out, "classic/probe_1", steps=10_000)
    registration.start(0)
    registration.beat({"step": 1_000, "steps_per_second": 500.0})  # the first update: written at once
    data = runs.read(out)
    assert data["step"] == 1_000 and data["sps"] == 500.0
    registration.beat({"step": 2_000, "steps_per_second": 900.0})  # within BEAT_SECONDS: not written
    assert runs.read(out)["step"] == 1_000
    row = runs_cli._row(runs.read_all()[0], time.time())
    assert row["state"] == "running" and row["eta_seconds"] == 18.0  # 9,000 steps left at 500 steps/s
