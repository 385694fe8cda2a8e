"""Faults the other fault tests do not inject, each once, end to end on a sandbox host: a systemd step failing after
the server was stopped, another team's job on a GPU, a torn line in a release's journal. Whatever happens, the
host ends serving the release it served before (or the one asked for), and nothing of anyone else's is touched."""

from __future__ import annotations

import shlex

import pytest
from faultkit import PATCHABLE, PLAIN, current, deploy_killed_at, managed_digest, rung, serving
from fleetcli import inv, inv_json, llama_playbook, sh

from fleet.host.releases import parse_events

HOST = "sbx1"
# systemctl that fails `daemon-reload` once while /run/fail-daemon-reload exists (first in root's PATH over ssh).
FLAKY = """#!/bin/sh
if [ "$1" = daemon-reload ] && rm /run/fail-daemon-reload 2>/dev/null; then
    echo "Failed to reload daemon: Connection timed out" >&2; exit 1
fi
exec /usr/bin/systemctl "$@"
"""


@pytest.fixture
def served(sandbox, sandbox_inventory, tmp_path):
    """A known-good release serving on HOST; the stand-ins this module adds are gone afterwards."""
    book = llama_playbook(tmp_path, PLAIN, name="llama-state")
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    yield data["release"]
    sh(sandbox_inventory, HOST, "rm -f /usr/local/sbin/systemctl /run/fail-daemon-reload; "
                                "systemctl stop fleet-test-training 2>/dev/null; true")


def test_a_daemon_reload_failing_after_the_stop_falls_back_to_the_release_that_served(
        served, sandbox, sandbox_inventory, tmp_path):
    sh(sandbox_inventory, HOST, f"printf %s {shlex.quote(FLAKY)} > /usr/local/sbin/systemctl && "
                                "chmod 755 /usr/local/sbin/systemctl && touch /run/fail-daemon-reload")
    other = llama_playbook(tmp_path, rung("other", X="1"), name="llama-state")
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(other), "--force")
    assert sh(sandbox_inventory, HOST, "test -e /run/fail-daemon-reload || echo used").strip() == "used"
    # the failed reload is the attempt's install failing; the host goes back to the release that served
    assert rc == 1 and data["status"] == "rolled_back", err[-3000:]
    assert data["release"] == served and current(sandbox_inventory, HOST) == served
    assert "daemon-reload" in data["attempts"][0]["evidence"]
    assert sh(sandbox_inventory, HOST, "systemctl is-active sglang").strip() == "active"
    assert serving(sandbox_inventory, HOST)
    assert not sh(sandbox_inventory, HOST, "test -d /var/lib/fleet/lock && echo locked").strip()


def test_another_team_s_job_on_a_gpu_is_refused_by_preflight_and_never_killed(
        served, sandbox, sandbox_inventory, tmp_path):
    pid = sh(sandbox_inventory, HOST, "systemd-run -q --unit=fleet-test-training sleep 600 && sleep 0.2 && "
                                      "systemctl show -p MainPID --value fleet-test-training").strip()
    assert pid.isdigit() and pid != "0"
    sh(sandbox_inventory, HOST, f"mkdir -p /run/fleet-sim/apps && echo '1 20480 python' > /run/fleet-sim/apps/{pid}")
    other = llama_playbook(tmp_path, rung("other", X="2"), name="llama-state")
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(other), "--force")
    assert rc == 1 and data["status"] == "failed", err[-3000:]
    (attempt,) = data["attempts"]
    assert attempt["outcome"] == "PREFLIGHT"
    assert f"GPU 1: pid {pid} (/usr/bin/sleep 600) of user root" in attempt["evidence"]
    assert sh(sandbox_inventory, HOST, f"kill -0 {pid} && echo alive").strip() == "alive"
    assert current(sandbox_inventory, HOST) == served and serving(sandbox_inventory, HOST)  # untouched
    sh(sandbox_inventory, HOST, f"systemctl stop fleet-test-training; rm -f /run/fleet-sim/apps/{pid}")
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(other), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]


def test_a_torn_last_line_in_a_dead_run_s_journal_blocks_neither_deploy_nor_rollback(
        served, sandbox, sandbox_inventory, tmp_path):
    other = llama_playbook(tmp_path, rung("other", X="3"), name="llama-state")
    deploy_killed_at(sandbox, HOST, other, "installed")
    (dead,) = [r for r in sh(sandbox_inventory, HOST, "ls /var/lib/fleet/releases").split() if r > served]
    sh(sandbox_inventory, HOST, f"printf '%s' '{{\"t\": 1.5, \"step\": \"rest' "
                                f">> /var/lib/fleet/releases/{dead}/events.jsonl")
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(other))
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    notes = " | ".join(data.get("recovered", []))
    assert f"release {dead} (llama-state) was interrupted after step installed" in notes
    assert "1 torn line(s) of its events.jsonl skipped" in notes
    journal = sh(sandbox_inventory, HOST, f"cat /var/lib/fleet/releases/{dead}/events.jsonl").encode()
    steps, torn = parse_events(journal)
    assert steps[-1]["step"] == "interrupted" and torn == 1  # the torn line is kept as evidence, and skipped
    proc = inv(sandbox, "rollback", "--host", HOST, "--playbook", str(other), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert current(sandbox_inventory, HOST) == served and serving(sandbox_inventory, HOST)


def test_a_patch_on_a_host_whose_current_release_cannot_be_read_refuses_before_changing_anything(
        sandbox, sandbox_inventory):
    """`inv patch` read `current` only to record its release, after the patch had written the files: it failed
    with the host patched and no release naming it. Now it reads `current` first and refuses untouched."""
    host, dead = "sbx0", "20261201T000000Z-dead"  # SM120: the set really writes files there
    proc = inv(sandbox, "patch", "--host", host, "--set", "sm120-allreduce-fusion", "--revert", "--json")
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    sh(sandbox_inventory, host, "mkdir -p /var/lib/fleet/releases && cd /var/lib/fleet && "
                                "{ [ ! -L current ] || mv current .current.saved-by-test; } && "
                                f"ln -s releases/{dead} current")
    try:
        before = managed_digest(sandbox_inventory, host)
        proc = inv(sandbox, "patch", "--host", host, "--set", "sm120-allreduce-fusion", "--json")
        said = proc.stdout + proc.stderr
        assert proc.returncode == 1, said[-2000:]
        assert f"points to release {dead}, whose manifest is missing or unreadable" in said
        after = managed_digest(sandbox_inventory, host)
        assert {p: after.get(p) for p in PATCHABLE} == {p: before.get(p) for p in PATCHABLE}  # nothing patched
        assert after == before
    finally:
        sh(sandbox_inventory, host, "cd /var/lib/fleet && rm -f current && "
                                    "{ [ ! -L .current.saved-by-test ] || mv .current.saved-by-test current; }")
