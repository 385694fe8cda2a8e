"""The network dies under a deploy: a cut link (sandbox.cut) is declared dead by the keepalive watchdog in
seconds, the other hosts of the fleet deploy are unaffected, the cut host is reported failed, and after
the link heals the next deploy recovers the host and completes. The host itself killed mid-watch (a power
cut) or rebooted goes the same way; a unit stopped by someone else mid-watch is a clear EXITED."""

from __future__ import annotations

import json
import time

import pytest
from faultkit import PLAIN, current, deploy_ok, in_progress, rung, serving, slow_inventory, wait_restarted
from fleetcli import inv_at, inv_json, llama_playbook, sh
from sshutil import recording_connects

from fleet.errors import ConnectError
from fleet.ssh.connect import ConnectOptions, Timeouts, open_connection
from fleet.ssh.remote import ConnectionLost, run

FIGURES: dict[str, float] = {}


def test_connecting_to_a_cut_host_retries_with_backoff_then_fails_clearly(sandbox, sandbox_inventory):
    host = sandbox_inventory.hosts["sbx4"]
    sandbox.cut("sbx4")
    try:
        with recording_connects() as connects, pytest.raises(
                ConnectError, match=r"sbx4 \(root@[\d.]+:22\): (timed out connecting after 1s|"
                                    r"connection refused or unreachable)"):
            open_connection(host, ConnectOptions(timeouts=Timeouts(connect=1), attempts=3))
    finally:
        sandbox.heal("sbx4")
    assert [a[0] for a in connects] == [host.address] * 3  # three tries, then a clear error
    assert sh(sandbox_inventory, "sbx4", "echo back").strip() == "back"


def _b(tmp_path):
    plain = llama_playbook(tmp_path, PLAIN, name="llama-net-plain")
    other = llama_playbook(tmp_path, rung("plain-b", B="1"), name="llama-net-b")
    return plain, other


def test_a_command_on_a_cut_link_fails_in_seconds_with_a_clear_class(sandbox, sandbox_inventory):
    host = sandbox_inventory.hosts["sbx4"]
    conn = open_connection(host, ConnectOptions(timeouts=Timeouts(keepalive_interval=1, keepalive_count_max=3)))
    try:
        assert run(conn, host, "echo up").stdout.strip() == "up"
        sandbox.cut("sbx4")
        start = time.monotonic()
        with pytest.raises(ConnectionLost, match=r"sbx4: connection lost during `sleep 600`: .*3 keepalives"):
            run(conn, host, "sleep 600")
        FIGURES["cut_detected_s"] = time.monotonic() - start
        print(f"cut link declared dead after {FIGURES['cut_detected_s']:.1f}s")
    finally:
        sandbox.heal("sbx4")
        conn.close()
    assert sh(sandbox_inventory, "sbx4", "echo back").strip() == "back"


def test_a_cut_mid_deploy_fails_that_host_only_and_a_later_deploy_completes(sandbox, sandbox_inventory, tmp_path):
    plain, other = _b(tmp_path)
    base = {h: deploy_ok(sandbox, h, plain) for h in ("sbx1", "sbx3")}
    slow = slow_inventory(sandbox, tmp_path, ["sbx3"])
    proc = inv_at(slow, "deploy", "--host", "sbx1", "--host", "sbx3", "--playbook", str(other), "--json", "--force",
                  "--yes",
                  wait=False)
    try:
        wait_restarted(sandbox_inventory, "sbx3", proc)
        sandbox.cut("sbx3")
        cut_at = time.monotonic()
        out, err = proc.communicate(timeout=300)
        FIGURES["cut_deploy_reported_s"] = time.monotonic() - cut_at
    finally:
        sandbox.heal("sbx3")
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert proc.returncode == 1
    assert hosts["sbx1"]["status"] == "ok" and serving(sandbox_inventory, "sbx1")
    assert hosts["sbx3"]["status"] == "failed"
    assert "sbx3: connection lost" in hosts["sbx3"]["error"] and "keepalives" in hosts["sbx3"]["error"]
    print(f"cut mid-deploy reported after {FIGURES['cut_deploy_reported_s']:.1f}s: {hosts['sbx3']['error']}")
    (dead,) = in_progress(sandbox_inventory, "sbx3")
    rc, data, err = inv_json(sandbox, "deploy", "--host", "sbx3", "--playbook", str(other), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    notes = " | ".join(data["recovered"])
    assert "recovered the lock of a dead run" in notes and f"release {dead}" in notes
    assert f"back on release {base['sbx3']}" in notes
    assert in_progress(sandbox_inventory, "sbx3") == [] and current(sandbox_inventory, "sbx3") == data["release"]


def test_a_host_killed_mid_watch_fails_clearly_and_after_reboot_is_recovered(sandbox, sandbox_inventory, tmp_path):
    plain, other = _b(tmp_path)
    base = deploy_ok(sandbox, "sbx4", plain)
    slow = slow_inventory(sandbox, tmp_path, ["sbx4"])
    proc = inv_at(slow, "deploy", "--host", "sbx4", "--playbook", str(other), "--json", "--force", wait=False)
    wait_restarted(sandbox_inventory, "sbx4", proc)
    sandbox.kill("sbx4")
    out, err = proc.communicate(timeout=300)
    data = json.loads(out)
    assert proc.returncode == 1 and data["status"] == "failed"
    assert "sbx4: connection lost" in data["error"], data["error"]
    sandbox.start("sbx4")  # the reboot
    rc, data, err = inv_json(sandbox, "deploy", "--host", "sbx4", "--playbook", str(other), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    assert f"back on release {base}" in " | ".join(data["recovered"])
    assert serving(sandbox_inventory, "sbx4") and in_progress(sandbox_inventory, "sbx4") == []


def test_a_unit_stopped_by_someone_else_mid_watch_is_exited_and_rolled_back(sandbox, sandbox_inventory, tmp_path):
    plain, other = _b(tmp_path)
    base = deploy_ok(sandbox, "sbx1", plain)
    slow = slow_inventory(sandbox, tmp_path, ["sbx1"])
    proc = inv_at(slow, "deploy", "--host", "sbx1", "--playbook", str(other), "--json", "--force", wait=False)
    wait_restarted(sandbox_inventory, "sbx1", proc)
    sh(sandbox_inventory, "sbx1", "systemctl stop sglang")
    out, err = proc.communicate(timeout=300)
    data = json.loads(out)
    assert proc.returncode == 1 and data["status"] == "rolled_back", err[-3000:]
    assert data["attempts"][0]["outcome"] == "EXITED" and "the server exited" in data["attempts"][0]["evidence"]
    assert current(sandbox_inventory, "sbx1") == base and serving(sandbox_inventory, "sbx1")
