"""The command line against sandbox hosts, as an operator types it: help never runs a task, a task that changes
hosts needs them named, several hosts need a yes (at the terminal, shown in tmux) or --yes, and a group may
bind the playbook. What reached each host is read back from its sshd journal."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from fleetcli import REPO, inv_at, llama_playbook, sh

INV = str(REPO / ".venv/bin/inv")
HOSTS = ("sbx0", "sbx1")
MARK = "/tmp/fleet-cli-targets"


def _logins_since(inventory, since: dict[str, str]) -> dict[str, int]:
    """sshd logins on each host since `since` (the check's own login counts once) and its releases."""
    seen = {}
    for name in HOSTS:
        out = sh(inventory, name, f"journalctl -q -o cat --since @{since[name]} _COMM=sshd "
                                  "| grep -c '^Accepted publickey'")
        seen[name] = int(out.strip() or 0) - 1
    return seen


def _now(inventory) -> dict[str, str]:
    stamps = {name: sh(inventory, name, "date +%s.%N").strip() for name in HOSTS}
    time.sleep(0.05)  # the stamp's own login is before it
    return stamps


def _state(inventory) -> dict[str, str]:
    return {name: sh(inventory, name, f"ls /var/lib/fleet/releases 2>/dev/null | wc -l; ls {MARK}* 2>/dev/null")
            for name in HOSTS}


def _help_commands(path: str) -> list[list[str]]:
    tasks = subprocess.run([INV, "--list"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in tasks.splitlines()[2:] if re.match(r"  \S", line)]
    assert {"deploy", "exec", "unlock", "classify", "sandbox.down", "demo"} <= set(names)
    positional = {"classify": ["x.log"], "unlock": ["sbx0", "tok"], "exec": ["true"],
                  **{n: ["sbx0"] for n in names if n.startswith("sandbox.") and n.split(".")[1] in
                     ("cut", "heal", "kill", "start")}}
    takes_hosts = {"probe", "deploy", "rollback", "history", "status", "logs", "bench", "tune", "audit", "patch",
                   "exec"}
    runs = []
    for name in names:
        where = ["-i", path, "-H", "sbx0", "-H", "sbx1"] if name in takes_hosts else []
        for flag in ("-h", "--help"):
            runs.append([name, *where, flag])
            if name in positional:
                runs.append([name, *where, *positional[name], flag])  # after its positional
    return runs


def test_help_on_every_task_contacts_no_host_and_changes_nothing(sandbox, sandbox_inventory):
    path = str(sandbox.cfg.inventory_path)
    before, since = _state(sandbox_inventory), _now(sandbox_inventory)
    runs = _help_commands(path)
    for args in runs:
        done = subprocess.run([INV, *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0 and done.stdout.startswith(f"Usage: inv {args[0]} "), (
            f"inv {shlex.join(args)}: exit {done.returncode}: {done.stdout[:200]} {done.stderr[-500:]}")
    assert len(runs) >= 44
    assert _logins_since(sandbox_inventory, since) == dict.fromkeys(HOSTS, 0)
    assert _state(sandbox_inventory) == before


CHANGING = [["deploy", "--playbook", "glm5-nvfp4"], ["rollback"], ["patch", "--set", "sm120-allreduce-fusion"],
            ["tune", "--playbook", "glm5-nvfp4"], ["bench", "--playbook", "glm5-nvfp4"],
            ["exec", "--cmd", f"touch {MARK}"]]


def test_a_task_that_changes_hosts_without_a_target_is_refused_before_contact(sandbox, sandbox_inventory):
    since = _now(sandbox_inventory)
    for task in CHANGING:
        done = inv_at(sandbox.cfg.inventory_path, *task)
        assert done.returncode == 2 and done.stdout == "", task
        assert done.stderr.strip() == (f"error: inv {task[0]} changes hosts: name them with --host or --group, or "
                                       "--all for every host of the inventory")
    assert _logins_since(sandbox_inventory, since) == dict.fromkeys(HOSTS, 0)


def test_several_hosts_need_yes_without_a_terminal_and_all_with_yes_goes_ahead(sandbox, sandbox_inventory):
    path = sandbox.cfg.inventory_path
    sh(sandbox_inventory, "sbx0", f"rm -f {MARK}*")
    sh(sandbox_inventory, "sbx1", f"rm -f {MARK}*")
    since = _now(sandbox_inventory)
    done = inv_at(path, "exec", "-H", "sbx0", "-H", "sbx1", "--cmd", f"touch {MARK}-no")
    assert done.returncode == 2 and "no terminal to ask on; pass --yes" in done.stderr and "sbx0, sbx1" in done.stderr
    assert _logins_since(sandbox_inventory, since) == dict.fromkeys(HOSTS, 0)
    assert inv_at(path, "exec", "-H", "sbx0", "-H", "sbx1", "--cmd", f"touch {MARK}-yes", "--yes").returncode == 0
    assert inv_at(path, "exec", "--all", "--cmd", f"touch {MARK}-one", "--host", "sbx0").returncode == 2
    for name in HOSTS:
        assert sh(sandbox_inventory, name, f"ls {MARK}*").split() == [f"{MARK}-yes"]


def test_globs_and_exclusions_pick_hosts_as_ansibles_limit_and_a_typo_in_one_is_refused(sandbox, sandbox_inventory):
    path = sandbox.cfg.inventory_path
    for name in HOSTS:
        sh(sandbox_inventory, name, f"rm -f {MARK}*")
    since = _now(sandbox_inventory)
    typo = inv_at(path, "exec", "-H", "sbx[01]", "-H", "!sbx11", "--yes", "--cmd", f"touch {MARK}-typo")
    assert (typo.returncode, typo.stdout) == (2, "") and typo.stderr.strip() == (
        "error: --host '!sbx11': no such host in the inventory; did you mean sbx1?")
    alone = inv_at(path, "exec", "-H", "!sbx1", "--cmd", f"touch {MARK}-alone")
    assert alone.returncode == 2 and "only narrows a selection" in alone.stderr
    assert _logins_since(sandbox_inventory, since) == dict.fromkeys(HOSTS, 0)
    done = inv_at(path, "exec", "-H", "sbx[01]", "-H", "!sbx1", "--cmd", f"touch {MARK}-glob")
    assert done.returncode == 0 and "fleet: 1 host: sbx0" in done.stderr, done.stderr[-2000:]
    assert [sh(sandbox_inventory, n, f"ls {MARK}* 2>/dev/null").split() for n in HOSTS] == [[f"{MARK}-glob"], []]


def _tmux_run(command: list[str], answer: str, timeout: float = 60.0) -> tuple[str, str]:
    """Run command in a fresh tmux terminal, answer its question once it shows, then (the screen, exit code)."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed (Debian: tmux); bootstrap.sh installs it")
    sock = f"fleet-plan-{os.getpid()}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in os.environ.items() if k.startswith("FLEET_"))
    shell = f"cd {shlex.quote(str(REPO))} && env {env} {shlex.join(command)}; echo @@rc=$?@@; sleep 600"
    subprocess.run([*tmux, "new-session", "-d", "-x", "160", "-y", "50", shell], check=True)
    try:
        deadline, asked = time.monotonic() + timeout, False
        while time.monotonic() < deadline:
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-J"], capture_output=True, text=True).stdout
            if "@@rc=" in screen:
                return screen, screen.split("@@rc=", 1)[1].split("@@", 1)[0]
            if not asked and "Go ahead? [y/N]" in screen:
                subprocess.run([*tmux, "send-keys", answer, "Enter"], check=True)
                asked = True
            time.sleep(0.1)
        pytest.fail(f"no exit within {timeout}s: {screen[-1500:]}")
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)


def test_on_a_terminal_the_plan_is_shown_and_asked_about(sandbox, sandbox_inventory):
    path = str(sandbox.cfg.inventory_path)
    for name in HOSTS:
        sh(sandbox_inventory, name, f"rm -f {MARK}*")
    command = [INV, "exec", "-i", path, "-H", "sbx0", "-H", "sbx1", "--cmd", f"touch {MARK}-asked"]
    screen, rc = _tmux_run(command, "n")
    assert "inv exec on 2 hosts: sbx0, sbx1" in screen and f"command: touch {MARK}-asked" in screen
    assert rc == "2" and "not confirmed (n); nothing changed" in screen
    assert all(sh(sandbox_inventory, n, f"ls {MARK}* 2>/dev/null").strip() == "" for n in HOSTS)
    screen, rc = _tmux_run(command, "y")
    assert rc == "0", screen[-1500:]
    assert all(sh(sandbox_inventory, n, f"ls {MARK}*").strip() == f"{MARK}-asked" for n in HOSTS)


def test_a_group_bound_playbook_is_used_and_a_host_without_one_is_named(sandbox, tmp_path):
    book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-bound")
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc.setdefault("groups", {}).update({"bound": {"playbook": str(book), "hosts": ["sbx2"]},
                                         "loose": {"hosts": ["sbx2", "sbx3"]}})
    folder = tmp_path / "inventory"
    folder.mkdir()
    (folder / "hosts.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    done = inv_at(folder / "hosts.yaml", "deploy", "--group", "bound", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "llama-bound" in done.stdout
    done = inv_at(folder / "hosts.yaml", "deploy", "--group", "loose", "--dry-run", "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert "no group of sbx3 binds one" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_site_folder_works_from_a_subfolder_and_from_outside_the_clone(sandbox, tmp_path):
    lab = tmp_path / "lab"
    (lab / "inventory").mkdir(parents=True)
    (lab / "deep/er").mkdir(parents=True)
    (lab / "playbooks").mkdir()
    shutil.copy(sandbox.cfg.inventory_path, lab / "inventory/hosts.yaml")
    (lab / "fleet-site.yaml").write_text("offline: true\n")
    llama_playbook(lab / "playbooks", [{"name": "plain"}], name="lab-llama")  # the site's own, by name
    env = {k: v for k, v in os.environ.items() if k not in ("FLEET_STATE_DIR", "FLEET_SITE")}
    fleet = [str(REPO / ".venv/bin/python"), "-m", "fleet.cli.program"]  # what .venv/bin/fleet runs

    def run(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*fleet, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL, env={**env, **extra})

    done = run("deploy", "-H", "sbx2", "-p", "lab-llama", "--dry-run", "--json", cwd=lab / "deep/er")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "lab-llama" in done.stdout
    done = run("probe", "-H", "sbx2", "--json", cwd=lab / "deep/er")
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((lab / ".fleet/facts").iterdir())  # the site's state, not the working folder's
    assert not (lab / "deep/er/.fleet").exists()
    done = run("history", "-H", "sbx2", "--json", cwd=tmp_path, FLEET_SITE=str(lab))
    assert done.returncode == 0, done.stderr[-2000:]
    done = run("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("fleet ")
