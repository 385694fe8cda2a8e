"""The fleet process SIGKILLed at each step of a deploy (fleet.faulthook): the next deploy finds the dead
run's journal, takes over its lock, undoes what it half did, puts the last known-good release back, and
then deploys; the host ends serving a known release with nothing half-written."""

from __future__ import annotations

import json

import pytest
from faultkit import (
    PATCHABLE,
    books,
    current,
    deploy_killed_at,
    events,
    in_progress,
    managed_digest,
    manifest,
    serving,
    temp_files,
)
from fleetcli import inv_json, sh

HOST = "sbx2"  # SM120: the patched rung really writes files there


@pytest.fixture(scope="module")
def good(_sandbox_session, tmp_path_factory):
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    plain, patched = books(tmp_path_factory.mktemp("kill-books"))
    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(plain), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    return {"release": data["release"], "plain": plain, "patched": patched}


STEPS = ["opened", "stop", "mid-patch", "installed", "restarted", "phase:weight_load", "attempt", "current"]


@pytest.mark.parametrize("step", STEPS)
def test_a_deploy_killed_at_each_step_is_recovered_by_the_next_one(step, good, sandbox, sandbox_inventory):
    inventory = sandbox_inventory
    if step == "mid-patch":  # the patched rung writes only where the host is not patched yet
        rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(good["plain"]), "--force")
        assert rc == 0 and data["status"] == "ok", err[-3000:]
    base = current(inventory, HOST)
    deploy_killed_at(sandbox, HOST, good["patched"], step)

    # What the dead run left: its lock, and (before `current`) a release still in progress with its journal.
    owner = json.loads(sh(inventory, HOST, "cat /var/lib/fleet/lock/owner.json"))
    assert owner["purpose"] == "deploy llama-patched"
    left = in_progress(inventory, HOST)
    if step == "current":
        assert left == [] and current(inventory, HOST) != base
    else:
        (dead,) = left
        last = events(inventory, HOST, dead)[-1]["step"]
        assert last == ("stop" if step == "mid-patch" else step.split(":")[0].replace("phase", "restarted"))
    if step == "mid-patch":  # the writer died after its first file: the host is half-patched
        runs = sh(inventory, HOST, "grep -l applying /var/lib/fleet/backups/runs/*/manifest.json")
        assert runs.strip()
        changed = [p for p in PATCHABLE if "is_sm120_supported()" in sh(inventory, HOST, f"cat {p}")
                   or "[9, 10, 12]" in sh(inventory, HOST, f"cat {p}")]
        assert 1 <= len(changed) < len(PATCHABLE)

    # `inv status` (read only) reports what the dead run left and what the next deploy will do.
    seen = inv_json(sandbox, "status", "--host", HOST)[1]["hosts"][0]["interrupted"]
    assert "lock left by a dead run" in seen and f"pid {owner['pid']} is no longer running" in seen
    if step != "current":
        assert f"release {dead} was interrupted after step" in seen

    rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(good["patched"]), "--force")
    assert rc == 0 and data["status"] == "ok", err[-3000:]
    notes = " | ".join(data.get("recovered", []))
    assert "recovered the lock of a dead run" in notes and f"pid {owner['pid']}" in notes
    if step != "current":
        assert f"release {dead} (llama-patched) was interrupted after step" in notes
        after = manifest(inventory, HOST, dead)
        assert after["status"] == "interrupted" and after["attempts"][-1]["outcome"] == "INTERRUPTED"
        assert events(inventory, HOST, dead)[-1]["step"] == "interrupted"
    if step not in ("opened", "current"):
        assert f"back on release {base}" in notes  # rolled back first, then deployed anew
    if step == "mid-patch":
        assert "was interrupted half-way: put back" in notes
    assert in_progress(inventory, HOST) == [] and temp_files(inventory, HOST) == []
    assert current(inventory, HOST) == data["release"] and serving(inventory, HOST)
    status = inv_json(sandbox, "status", "--host", HOST)[1]["hosts"][0]
    assert status["drift"] == [] and status["release"] == data["release"] and status["interrupted"] is None
    assert sh(inventory, HOST, "test -e /var/lib/fleet/lock || echo free").strip() == "free"
    assert managed_digest(inventory, HOST)  # the host answers and every managed file is readable
