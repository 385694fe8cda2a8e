"""`inv rollback --to before-fleet`: the host as fleet found it, from the record fleet makes at its first write."""

from __future__ import annotations

import json

from fleetcli import inv, llama_playbook, sh

HOST = "sbx4"
UNIT, ENV, KEY = "/etc/systemd/system/sglang.service", "/etc/fleet/sglang.env", "/etc/fleet/sglang.key"
PLAIN = [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"disable-custom-all-reduce": True}}]
HAND = "[Unit]\nDescription=sglang by hand\n[Service]\nExecStart=/bin/sleep infinity\n"


def _fresh(inventory) -> None:
    sh(inventory, HOST, f"systemctl stop sglang 2>/dev/null; systemctl disable sglang 2>/dev/null; "
                        f"rm -rf {UNIT} {ENV} {KEY} /var/lib/fleet; systemctl daemon-reload; true")


def test_a_host_without_a_unit_before_fleet_is_left_without_one(sandbox, sandbox_inventory, tmp_path):
    _fresh(sandbox_inventory)
    book = llama_playbook(tmp_path, PLAIN, name="llama-before")
    try:
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        proc = inv(sandbox, "rollback", "--host", HOST, "--to", "before-fleet", "--json")
        data = json.loads(proc.stdout)
        assert proc.returncode == 0 and data["status"] == "ok" and data["release"] == "before-fleet", data
        assert sh(sandbox_inventory, HOST, f"ls {UNIT} {ENV} /var/lib/fleet/current 2>&1 | grep -c 'No such'"
                  ).strip() == "3"
        assert sh(sandbox_inventory, HOST, "systemctl is-active sglang; true").strip() in ("inactive", "unknown")
        history = json.loads(inv(sandbox, "history", "--host", HOST, "--json").stdout)
        assert len(history["hosts"][0]["releases"]) == 1 and history["hosts"][0]["current"] is None
    finally:
        _fresh(sandbox_inventory)


def test_a_hand_written_unit_comes_back_byte_for_byte(sandbox, sandbox_inventory, tmp_path):
    _fresh(sandbox_inventory)
    sh(sandbox_inventory, HOST, f"printf %s '{HAND}' > {UNIT} && chmod 0640 {UNIT}")
    book = llama_playbook(tmp_path, PLAIN, name="llama-before-hand")
    try:
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert sh(sandbox_inventory, HOST, f"head -n 1 {UNIT}").startswith("# Managed by fleet")
        # a second deploy does not take fleet's own unit for what was there before
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json", "--force")
        assert proc.returncode == 0, proc.stderr[-2000:]
        proc = inv(sandbox, "rollback", "--host", HOST, "--to", "before-fleet", "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
        assert sh(sandbox_inventory, HOST, f"cat {UNIT}") == HAND
        assert sh(sandbox_inventory, HOST, f"stat -c %a {UNIT}").strip() == "640"
        assert sh(sandbox_inventory, HOST, f"test -e {ENV} && echo env; true").strip() == ""
    finally:
        _fresh(sandbox_inventory)


def test_a_host_fleet_deployed_without_a_record_is_refused_unchanged(sandbox, sandbox_inventory, tmp_path):
    _fresh(sandbox_inventory)
    book = llama_playbook(tmp_path, PLAIN, name="llama-before-none")
    try:
        assert inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json").returncode == 0
        sh(sandbox_inventory, HOST, "rm -rf /var/lib/fleet/before-fleet")  # as a fleet that kept no record left it
        before = sh(sandbox_inventory, HOST, f"sha256sum {UNIT} {ENV}")
        proc = inv(sandbox, "rollback", "--host", HOST, "--to", "before-fleet", "--json")
        assert proc.returncode == 1 and "was not recorded" in json.loads(proc.stdout)["error"]
        assert sh(sandbox_inventory, HOST, f"sha256sum {UNIT} {ENV}") == before
    finally:
        _fresh(sandbox_inventory)


def test_a_keyed_deploy_leaves_no_key_behind(sandbox, sandbox_inventory, tmp_path):
    _fresh(sandbox_inventory)
    book = llama_playbook(tmp_path, PLAIN, name="llama-before-key",
                          serve={"host": "0.0.0.0", "api_key": {"env": "FLEET_TEST_API_KEY"}})
    try:
        proc = inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json",
                   env={"FLEET_TEST_API_KEY": "sk-before-fleet-1"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert sh(sandbox_inventory, HOST, f"cat {KEY}") == "sk-before-fleet-1"
        proc = inv(sandbox, "rollback", "--host", HOST, "--to", "before-fleet", "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
        assert sh(sandbox_inventory, HOST, f"ls {UNIT} {ENV} {KEY} 2>&1 | grep -c 'No such'").strip() == "3"
        assert sh(sandbox_inventory, HOST, "test -x /var/lib/fleet/bin/fleet-launch && echo kept").strip() == "kept"
    finally:
        _fresh(sandbox_inventory)


def test_a_write_that_fails_half_way_puts_back_what_was_written_and_leaves_the_release_serving(
        sandbox, sandbox_inventory, tmp_path):
    """The unit went back to the hand-written one, then writing the env failed (a full disk): before, the host was
    left stopped, on the hand unit and fleet's env. Now the files are written before anything is stopped, each
    old one kept beside it, and the written ones go back by rename: nothing changed, the release still serves."""
    _fresh(sandbox_inventory)
    sh(sandbox_inventory, HOST, f"printf %s '{HAND}' > {UNIT} && mkdir -p /etc/fleet && printf 'A=1\\n' > {ENV}")
    book = llama_playbook(tmp_path, PLAIN, name="llama-before-half")
    try:
        assert inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json").returncode == 0
        trace = tmp_path / "trace"
        args = ("rollback", "--host", HOST, "--to", "before-fleet", "--json")
        assert inv(sandbox, *args, env={"FLEET_FAULT_TRACE": str(trace)}).returncode == 0  # learn the step...
        (n,) = [line.split("\t")[0] for line in trace.read_text().splitlines() if f"fleet-write {ENV}" in line]
        assert inv(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--json").returncode == 0
        before = sh(sandbox_inventory, HOST, f"sha256sum {UNIT} {ENV}; readlink /var/lib/fleet/current")
        proc = inv(sandbox, *args, env={"FLEET_FAULT_AT": f"{n}:fail"})  # ...then make it fail
        error = json.loads(proc.stdout)["error"]
        assert proc.returncode == 1 and "the files already written were put back; nothing was changed" in error
        assert sh(sandbox_inventory, HOST, f"sha256sum {UNIT} {ENV}; readlink /var/lib/fleet/current") == before
        assert sh(sandbox_inventory, HOST, "systemctl is-active sglang; true").strip() == "active"
        assert sh(sandbox_inventory, HOST, "ls -a /etc/systemd/system /etc/fleet | grep -c kept-by-fleet; true"
                  ).strip() == "0"
    finally:
        _fresh(sandbox_inventory)
