"""`inv deploy --serial 1,2 --canary` on sandbox hosts: a release whose greedy answers differ from the old
release's fails its canary before any traffic, and its canary host is put back on the release before, serving;
the later batches are never touched (sandbox/sim/README.md: SGLANG_SIM_ANSWERS plays the new numerics)."""

from __future__ import annotations

import json

from fleetcli import inv_json, llama_playbook, sh

HOSTS = ["sbx1", "sbx2", "sbx3"]


def rollout(sandbox, state, book, *args):
    picks = [a for h in HOSTS for a in ("--host", h)]
    return inv_json(sandbox, "deploy", *picks, "--playbook", str(book), "--yes", *args,
                    env={"FLEET_STATE_DIR": str(state)})


def test_a_release_that_answers_otherwise_fails_its_canary_before_traffic_and_is_put_back(
        _sandbox_session, sandbox_inventory, tmp_path):
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    state = tmp_path / "state"
    # one playbook upgraded in place: the same name, the new release's numerics in its serve.env
    old = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-canary", serve={"env": {"NCCL_P2P_DISABLE": "1"}})
    rc, data, err = rollout(sandbox, state, old, "--serial", "1,2")
    assert rc == 0, err[-3000:]
    previous = {h["host"]: h["release"] for h in data["hosts"]}
    new = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-canary",
                         serve={"env": {"NCCL_P2P_DISABLE": "1", "SGLANG_SIM_ANSWERS": "differ"}},
                         canary={"window": 5, "max_window": 10, "rate": 2})
    rc, data, err = rollout(sandbox, state, new, "--serial", "1,2", "--canary")
    assert rc == 1, err[-3000:]
    judged = data["judged"]
    assert judged["verdict"] is None and not judged["numerics"]["ok"]  # no traffic was sent
    assert judged["numerics"]["compared"] == 5 and len(judged["numerics"]["parted"]) == 3  # 2 known answers agree
    one, *rest = data["hosts"]
    assert one["status"] == "failed" and one["error"].endswith(f"put back on release {previous['sbx1']}")
    assert [h["status"] for h in rest] == ["skipped", "skipped"]
    assert data["stopped"].startswith("the canary did not pass its judge after batch 1 of 2")
    assert sh(sandbox_inventory, "sbx1", "readlink /var/lib/fleet/current").strip().endswith(previous["sbx1"])
    out = sh(sandbox_inventory, "sbx1", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")  # serving the old release again
    for h in ("sbx2", "sbx3"):
        assert sh(sandbox_inventory, h, "readlink /var/lib/fleet/current").strip().endswith(previous[h])
