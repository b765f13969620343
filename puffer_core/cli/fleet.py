"""``puffer fleet``: the boxes of an Ansible inventory, read back.

    puffer fleet status -i INVENTORY [--json] [--timeout S]   one row per box, gathered in parallel
    puffer fleet ray -i INVENTORY --user NAME                 the steps of one Ray cluster over NAME's boxes
    puffer fleet facts [--json]                               what this box says of itself (run on a box)

``status`` asks every box of the inventory's ``puffer_boxes`` at once through Ansible (the
same inventory, connection and credentials as ``ansible-playbook tank/fleet/site.yml``) to
run ``puffer fleet facts --json`` as root, each within ``--timeout`` seconds: a box that does
not answer is a row saying why, never a hang. The playbook is what changes boxes; this only
reads them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from puffer_core.cli.fleet_facts import box_facts
from puffer_core.cli.tables import output_console, print_table
from puffer_core.errors import APIUsageError

__all__ = ["fleet"]

console = output_console(stderr=True, highlight=False)
GROUP = "puffer_boxes"
FACTS = "/usr/local/bin/puffer fleet facts --json"


def _ansible(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise APIUsageError(f"{name} is not installed here: pip install ansible (the fleet's controller needs it)")
    return path


def inventory(path: Path) -> dict[str, Any]:
    """The inventory as Ansible reads it: {box: its variables} of group puffer_boxes."""
    proc = subprocess.run([_ansible("ansible-inventory"), "-i", str(path), "--list"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    if proc.returncode != 0:
        raise APIUsageError(f"ansible-inventory cannot read {path}: {' '.join(proc.stderr.split())[:300]}")
    data = json.loads(proc.stdout)
    boxes = data.get(GROUP, {}).get("hosts", [])
    if not boxes:
        raise APIUsageError(f"{path} has no host in group {GROUP} (see tank/fleet/inventory.example.yml)")
    hostvars = data.get("_meta", {}).get("hostvars", {})
    found = {box: hostvars.get(box, {}) for box in boxes}
    for variables in found.values():
        users_problem = _users_problem(variables.get("puffer_users") or {}, boxes)
        if users_problem:
            raise APIUsageError(f"{path}: {users_problem}")
    return found


USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")


def _users_problem(users: Any, boxes: list[str]) -> str | None:
    """Why ``puffer_users`` is not a map of user names to lists of the inventory's boxes (the playbook's check too)."""
    if not isinstance(users, dict):
        return f"puffer_users is {json.dumps(users)[:80]}, not a map of each user to a list of boxes"
    for user, theirs in users.items():
        if not isinstance(user, str) or not USER_NAME.match(user):
            return f"puffer_users: {json.dumps(user)[:40]} is not a user name ([a-z_][a-z0-9_-], at most 32)"
        # A string would match boxes by its letters (alice: box10 is on box1), as Ansible's `in` does.
        if not isinstance(theirs, list) or not all(isinstance(box, str) and box in boxes for box in theirs):
            return (f"puffer_users: {user}: {json.dumps(theirs)[:80]} is not a list of this inventory's boxes "
                    f"({', '.join(boxes)}); write it as {user}: [BOX, ...]")  # fmt: skip
    return None


def _gather(path: Path, boxes: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    """Each box's answer: {box: {"facts": …} or {"error": why}}, all asked at once."""
    env = {**os.environ, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json",
           "ANSIBLE_HOST_KEY_CHECKING": os.environ.get("ANSIBLE_HOST_KEY_CHECKING", "True")}  # fmt: skip
    command = [_ansible("ansible"), GROUP, "-i", str(path), "--become", "-m", "ansible.builtin.command",
               "-a", FACTS, "--forks", str(max(1, len(boxes))), "--timeout", str(int(timeout)),
               "--task-timeout", str(int(timeout))]  # fmt: skip
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout * 3 + 60)
    except subprocess.TimeoutExpired:
        return {box: {"error": f"no answer within {timeout:.0f} s"} for box in boxes}
    try:
        plays = json.loads(proc.stdout)["plays"]
        results = plays[0]["tasks"][0]["hosts"] if plays and plays[0]["tasks"] else {}
    except (ValueError, KeyError, IndexError):
        raise APIUsageError(f"ansible gave no result: {' '.join((proc.stderr or proc.stdout).split())[:300]}") from None
    found = {}
    for box in boxes:
        result = results.get(box)
        if result is None:
            found[box] = {"error": "no answer"}
        elif result.get("unreachable"):
            found[box] = {"error": f"unreachable: {' '.join(str(result.get('msg', '')).split())[:200]}"}
        elif result.get("failed") or result.get("rc"):
            why = result.get("stderr") or result.get("msg") or "failed"
            found[box] = {"error": f"puffer fleet facts failed: {' '.join(str(why).split())[:200]}"}
        else:
            try:
                found[box] = {"facts": json.loads(result.get("stdout", ""))}
            except ValueError:
                found[box] = {"error": "puffer fleet facts printed no JSON"}
    return found


def status(path: Path, timeout: float) -> list[dict[str, Any]]:
    """One row per box of the inventory (see the module's docstring)."""
    boxes = inventory(path)
    answers = _gather(path, list(boxes), timeout)
    rows = []
    for box, variables in boxes.items():
        answer, wanted = answers[box], variables.get("puffer_image")
        row: dict[str, Any] = {"box": box, "reachable": "facts" in answer, "error": answer.get("error")}
        facts = answer.get("facts")
        if facts is not None:
            image = facts["image"]
            row.update(facts)
            row["image_is_inventorys"] = bool(wanted) and (image.get("file") == wanted or wanted in image["digests"])
            expected = sorted(user for user, on in (variables.get("puffer_users") or {}).items() if box in on)
            row["users_expected"] = expected
            row["users_match"] = sorted(user["name"] for user in facts["users"]) == expected
        rows.append(row)
    return rows


def _short(digest: str | None) -> str:
    if not digest:
        return "–"
    return digest.rpartition("@")[2][:19] if "@" in digest else digest[:19]


def _gpu(gpu: dict[str, Any]) -> str:
    return f"{gpu['memory_used_mb']:.0f}/{gpu['memory_total_mb']:.0f} MB, {gpu['utilisation_percent']:.0f}%"


def _print_status(rows: list[dict[str, Any]]) -> None:
    table = Table(title="puffer boxes")
    for column in ("box", "state", "image", "users (containers, runs)", "load", "disk free", "GPUs", "each tank"):
        table.add_column(column, overflow="fold")
    for row in rows:
        if not row["reachable"]:
            table.add_row(row["box"], f"[red]{row['error']}[/]", "", "", "", "", "", "")
            continue
        image = f"{_short(row['image'].get('file'))} " + ("(the inventory's)" if row["image_is_inventorys"] else
                                                          "[yellow](not the inventory's)[/]")  # fmt: skip
        users = []
        for user in row["users"]:
            running = sum(container["state"] == "running" for container in user["containers"])
            states = [run["state"] for run in user["runs"]]
            runs = ", ".join(f"{states.count(s)} {s}" for s in ("running", "interrupted") if s in states)
            skipped = len(user.get("problems") or [])
            bad = f", [yellow]{skipped} bad record{'s' * (skipped != 1)} skipped[/]" if skipped else ""
            users.append(f"{user['name']} ({running}/{len(user['containers'])} up{', ' + runs if runs else ''}{bad})")
        if not row["users_match"]:
            users.append(f"[yellow]expected {', '.join(row['users_expected']) or 'none'}[/]")
        gpus = "; ".join(_gpu(gpu) for gpu in row["gpus"] or []) or "none"
        limits = row.get("limits") or {}
        each = limits.get("describe") or f"[yellow]{limits.get('error', 'not reported')}[/]"
        table.add_row(row["box"], "up", image, "\n".join(users) or "none", f"{row['load'][0]:.2f}",
                      f"{row['disk_free_gb']:.1f} GB", gpus, each)  # fmt: skip
    print_table(output_console(), table)


@click.group("fleet", context_settings={"help_option_names": ["-h", "--help"]})
def fleet() -> None:
    """The boxes of an Ansible inventory (tank/fleet/): read back what the playbook set up."""


INVENTORY = click.option("-i", "--inventory", "inventory_path", required=True,
                         type=click.Path(exists=True, dir_okay=False, path_type=Path),
                         help="The Ansible inventory (group puffer_boxes, puffer_image, puffer_users).")  # fmt: skip


@fleet.command("status")
@INVENTORY
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("--timeout", default=10.0, show_default=True, type=click.FloatRange(1, 300),
              help="Seconds each box has to answer; a box that does not is a row saying so.")  # fmt: skip
def status_cmd(inventory_path: Path, as_json: bool, timeout: float) -> None:
    """One row per box: reachable or why not, its image and whether it is the inventory's,
    the users enrolled and their containers, their runs, the load, free disk and the GPUs."""
    rows = status(inventory_path, timeout)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    _print_status(rows)


@fleet.command("facts")
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON (what fleet status reads).")
def facts_cmd(as_json: bool) -> None:
    """What this box says of itself: image, users, containers, runs, load, disk, GPUs (run as root)."""
    facts = box_facts()
    click.echo(json.dumps(facts, indent=None if as_json else 2))


@fleet.command("ray")
@INVENTORY
@click.option("--user", "user", required=True, metavar="NAME", help="The user whose boxes form the cluster.")
@click.option("--port", default=6379, show_default=True, type=click.IntRange(1024, 65535), help="The head's port.")
def ray_cmd(inventory_path: Path, user: str, port: int) -> None:
    """Print the steps of one Ray cluster over USER's boxes: the head in their tank on the first,
    a worker in their tank on each of the others (host network), the token shared by hand."""
    boxes = inventory(inventory_path)
    theirs = [box for box, variables in boxes.items() if box in (variables.get("puffer_users") or {}).get(user, [])]
    if not theirs:
        raise APIUsageError(f"{user} is on no box of {inventory_path} (puffer_users)")
    address = {box: boxes[box].get("ansible_host", box) for box in theirs}
    head = theirs[0]
    # In single quotes: $HOME is the box's (the tank's) home, not the laptop's.
    env = "export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$HOME/puffer-cluster/auth_token"
    lines = [
        f"# One Ray cluster over {user}'s {len(theirs)} box(es), in your own tank on each (host network):",
        f"# {', '.join(f'{box} ({address[box]})' for box in theirs)}. The boxes' network must be private.",
        f"# 1. The cluster's token, made on {head} and copied to the others, readable by you only:",
        f"ssh {user}@{address[head]} 'mkdir -m 700 -p ~/puffer-cluster && umask 077 && "
        "ray get-auth-token --generate > ~/puffer-cluster/auth_token'",
        *(f"ssh {user}@{address[head]} cat puffer-cluster/auth_token | ssh {user}@{address[box]} "
          "'mkdir -m 700 -p ~/puffer-cluster && umask 077 && cat > ~/puffer-cluster/auth_token'"
          for box in theirs[1:]),
        f"# 2. The head on {head}, then a node on each other box (each finds the token through {env.split()[2]}):",
        f"ssh {user}@{address[head]} '{env}; ray start --head --port {port} --node-ip-address {address[head]} "
        "--include-dashboard false'",
        *(f"ssh {user}@{address[box]} '{env}; ray start --address {address[head]}:{port} "
          f"--node-ip-address {address[box]}'" for box in theirs[1:]),
        "# 3. Train over it from the head's tank (the learner and OUT stay there):",
        f"ssh {user}@{address[head]} '{env}; puffer train ENV --backend ray --ray-address {address[head]}:{port} "
        "--placement spread --out runs/ENV-ray --detach'",
        f"# (In an interactive shell there, {env} first, or add that line to ~/.bashrc.)",
        "# Stop it: ssh BOX 'ray stop' on each box.",
    ]  # fmt: skip
    click.echo("\n".join(lines))
