"""A non-root operator end to end: deploy, status, logs, patch and rollback (to the release before, then to
before-fleet) through the CLI as user ops, whose sudo wants a password that comes from an inventory
become_password reference. What fleet writes stays root's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sshutil
import yaml
from fleetcli import inv_at, llama_playbook, sh

HOST = "sbx2"
PASSWORD = "ops-" + os.urandom(6).hex() + " pw"
UNIT, ENV, KEY = "/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env", "/etc/fleet/sglang.key"
PATCHED = "/root/ml-env/lib/python3.11/site-packages/flashinfer/jit/comm.py"
PLAIN = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]


def _fresh(inventory) -> None:
    sh(inventory, HOST, f"systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
                        f"rm -rf {UNIT} {ENV} {KEY} /var/lib/fleet; systemctl daemon-reload; true")


@pytest.fixture
def as_ops(sandbox, sandbox_inventory, tmp_path):
    """An inventory in which HOST is reached as ops (become, password from env FLEET_TEST_OPS_PW)."""
    sshutil.make_sudo_user(sandbox_inventory.hosts[HOST], "ops", PASSWORD)
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {HOST: {**doc["hosts"][HOST], "user": "ops", "become": True,
                           "become_password": {"env": "FLEET_TEST_OPS_PW"}}}
    (tmp_path / "inventory").mkdir()
    path = tmp_path / "inventory/ops.yaml"  # alone in its folder: fleet reads every inventory file beside it
    path.write_text(yaml.safe_dump(doc))
    _fresh(sandbox_inventory)
    yield path
    _fresh(sandbox_inventory)


def ops(path: Path, *args: str):
    proc = inv_at(path, *args, env={"FLEET_TEST_OPS_PW": PASSWORD})
    assert PASSWORD not in proc.stdout + proc.stderr
    return proc


def ops_json(path: Path, *args: str) -> dict:
    proc = ops(path, *args, "--json")
    assert proc.returncode == 0, (args, proc.stdout[-1500:], proc.stderr[-1500:])
    return json.loads(proc.stdout)


def test_deploy_status_logs_patch_and_rollback_as_a_sudo_user_with_a_password(as_ops, sandbox_inventory, tmp_path):
    original = sh(sandbox_inventory, HOST, f"sha256sum {PATCHED}")
    book = llama_playbook(tmp_path, PLAIN, name="llama-as-ops")
    first = ops_json(as_ops, "deploy", "--host", HOST, "--playbook", str(book))
    assert first["status"] == "ok", first
    board = ops_json(as_ops, "status", "--host", HOST)["hosts"][0]
    assert board["ok"] and board["unit"]["ActiveState"] == "active" and board["drift"] == [], board
    logs = ops(as_ops, "logs", "--host", HOST, "--json")
    events = [json.loads(x) for x in logs.stdout.splitlines()]  # the system journal: readable as root only
    # exit 1 exactly when a fatal line is shown (an earlier test's crash may still be in the host's journal)
    fatal = any(e["severity"] == "fatal" for e in events)
    assert logs.returncode == (1 if fatal else 0), logs
    assert any("GET /health" in e["text"] for e in events) and {e["host"] for e in events} == {HOST}, logs
    patched = ops_json(as_ops, "patch", "--host", HOST, "--set", "sm120-allreduce-fusion")["hosts"][0]
    assert patched["release"] and sh(sandbox_inventory, HOST, f"sha256sum {PATCHED}") != original, patched
    # every file fleet wrote is root's, none is the login user's
    owners = sh(sandbox_inventory, HOST, f"stat -c '%U:%G %n' {UNIT} {ENV} {PATCHED}; "
                                         "find /var/lib/fleet -printf '%u:%g %p\\n'").splitlines()
    assert owners and all(o.startswith("root:root ") for o in owners), [o for o in owners if "root:root" not in o]
    back = ops_json(as_ops, "rollback", "--host", HOST, "--playbook", str(book))
    assert back["release"] == first["release"], back
    assert sh(sandbox_inventory, HOST, f"sha256sum {PATCHED}") == original
    gone = ops_json(as_ops, "rollback", "--host", HOST, "--to", "before-fleet")
    assert gone["status"] == "ok" and gone["release"] == "before-fleet", gone
    left = sh(sandbox_inventory, HOST, f"ls {UNIT} {ENV} /var/lib/fleet/current 2>&1 | grep -c 'No such'")
    assert left.strip() == "3"


def test_without_the_password_every_task_stops_before_changing_anything(as_ops, sandbox_inventory, tmp_path):
    book = llama_playbook(tmp_path, PLAIN, name="llama-as-ops-nopw")
    proc = inv_at(as_ops, "deploy", "--host", HOST, "--playbook", str(book), "--json", env={"FLEET_TEST_OPS_PW": ""})
    assert proc.returncode == 2 and "FLEET_TEST_OPS_PW" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    wrong = inv_at(as_ops, "status", "--host", HOST, "--json", env={"FLEET_TEST_OPS_PW": "not-it"})
    assert wrong.returncode == 1 and "sudo refused the become password for ops" in wrong.stdout + wrong.stderr
    assert sh(sandbox_inventory, HOST, f"ls {UNIT} /var/lib/fleet 2>&1 | grep -c 'No such'").strip() == "2"
