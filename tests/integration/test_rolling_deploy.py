"""Rolling deploys (`inv deploy --serial ... --max-fail ...`) on sandbox hosts running the simulated stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleetcli import inv, inv_json, llama_playbook, sh

HOSTS = ["sbx1", "sbx2", "sbx3"]  # 8x H100, 2x RTX 5090, 8x B200
P2P_OFF = {"env": {"NCCL_P2P_DISABLE": "1"}}


def rollout(sandbox, state: Path, book: Path, *args, hosts=HOSTS):
    picks = [a for h in hosts for a in ("--host", h)]
    return inv_json(sandbox, "deploy", *picks, "--playbook", str(book), "--yes", *args,
                    env={"FLEET_STATE_DIR": str(state)})


def releases(inventory, name) -> list[str]:
    return sh(inventory, name, "ls /var/lib/fleet/releases 2>/dev/null").split()


def events(inventory, name, release) -> dict[str, float]:
    """The time of each step's first event in a release's log."""
    out: dict[str, float] = {}
    for line in sh(inventory, name, f"cat /var/lib/fleet/releases/{release}/events.jsonl").splitlines():
        event = json.loads(line)
        out.setdefault(event["step"], event["t"])
    return out


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def first(_sandbox_session, state, tmp_path_factory):
    """`--serial 1,2` on sbx1, sbx2, sbx3: sbx1 alone, then the other two together."""
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    book = llama_playbook(tmp_path_factory.mktemp("books"), [{"name": "plain"}], name="llama-roll", serve=P2P_OFF)
    rc, data, err = rollout(sandbox, state, book, "--serial", "1,2")
    return {"rc": rc, "data": data, "stderr": err, "book": book}


def test_serial_runs_the_first_host_alone_then_the_next_two_together(first, sandbox_inventory, state):
    data = first["data"]
    assert first["rc"] == 0, first["stderr"][-3000:]
    assert [h["host"] for h in data["hosts"]] == HOSTS
    assert [h["status"] for h in data["hosts"]] == ["ok", "ok", "ok"]
    assert [(b["hosts"], b["status"]) for b in data["batches"]] == [(["sbx1"], "ok"), (["sbx2", "sbx3"], "ok")]
    assert data["stopped"] is None
    t = {h["host"]: events(sandbox_inventory, h["host"], h["release"]) for h in data["hosts"]}
    # sbx1 served and was made current before sbx2 or sbx3 opened a release ...
    assert t["sbx1"]["current"] <= min(t["sbx2"]["opened"], t["sbx3"]["opened"])
    # ... and the second batch ran in parallel: each opened before the other was done
    assert t["sbx2"]["opened"] < t["sbx3"]["current"] and t["sbx3"]["opened"] < t["sbx2"]["current"]
    for h in data["hosts"]:
        current = sh(sandbox_inventory, h["host"], "readlink /var/lib/fleet/current").strip()
        assert current.endswith(h["release"]) and h["config"]["rung"] == "plain"
    # every host taught its fingerprint (three kinds of hardware: three entries)
    entries = json.loads((state / "known-good.json").read_text())["entries"]
    assert sorted(e["host"] for e in entries.values()) == HOSTS
    assert "remembered rung plain" in first["stderr"]  # progress on stderr with --json


def test_a_failing_first_batch_stops_the_rollout_and_leaves_the_rest_untouched(first, sandbox, sandbox_inventory,
                                                                                state, tmp_path):
    before = {h: releases(sandbox_inventory, h) for h in HOSTS}
    previous = first["data"]["hosts"][0]["release"]
    doomed = llama_playbook(tmp_path, [{"name": "too-greedy", "flags": {"mem-fraction-static": 0.99}}],
                            name="llama-doomed", serve=P2P_OFF)
    rc, data, err = rollout(sandbox, state, doomed, "--serial", "1,2")
    assert rc == 1, err[-3000:]
    one, *rest = data["hosts"]
    assert one["status"] == "rolled_back" and one["release"] == previous
    assert [a["outcome"] for a in one["attempts"]] == ["CUDA_OOM"]
    assert [(h["host"], h["status"]) for h in rest] == [("sbx2", "skipped"), ("sbx3", "skipped")]
    assert [b["status"] for b in data["batches"]] == ["failed", "skipped"]
    assert "more than --max-fail 0" in data["stopped"]
    # the failed host is back on its previous release, serving; the skipped ones got no new release at all
    assert sh(sandbox_inventory, "sbx1", "readlink /var/lib/fleet/current").strip().endswith(previous)
    out = sh(sandbox_inventory, "sbx1", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")
    assert len(releases(sandbox_inventory, "sbx1")) == len(before["sbx1"]) + 1
    for h in ("sbx2", "sbx3"):
        assert releases(sandbox_inventory, h) == before[h]
        assert f"{h} probing" not in err  # never contacted


def test_one_crash_is_tried_again_and_a_second_skips_the_rung_for_its_fingerprint(sandbox, state, tmp_path):
    # sbx2 and sbx4 are both 2x RTX 5090 with the same driver and packages, but sbx2 refuses P2P in a workstation
    # and sbx4 reports P2P OK with no virtualisation known: two fingerprints, and neither learns from the other
    book = llama_playbook(tmp_path, [{"name": "too-greedy", "flags": {"mem-fraction-static": 0.99}},
                                     {"name": "plain", "flags": {"disable-custom-all-reduce": True}}],
                          name="llama-learn", serve=P2P_OFF)
    rc, data, err = rollout(sandbox, state, book, "--serial", "1", hosts=["sbx2", "sbx4"])
    assert rc == 0, err[-3000:]
    a, b = data["hosts"]
    for host in (a, b):
        assert [(x["rung"], x["outcome"]) for x in host["attempts"]] == [("too-greedy", "CUDA_OOM"), ("plain", "READY")]
    keys = {k.split("/")[0] for k in json.loads((state / "known-good.json").read_text())["entries"]
            if k.endswith("/llama-learn")}
    assert len(keys) == 2

    def again() -> dict:
        rc, data, err = rollout(sandbox, state, book, "--force", "--serial", "1", hosts=["sbx2"])
        assert rc == 0, err[-3000:]
        return data["hosts"][0] if "hosts" in data else data

    # one sighting is not evidence: sbx2 tries the rung again before the known-good one, and it crashes again
    assert [(x["rung"], x["outcome"]) for x in again()["attempts"]] == [("too-greedy", "CUDA_OOM"), ("plain", "READY")]
    # seen twice on sbx2 alone: host-local until another host of the fingerprint sees it, so tried again
    third = again()["attempts"]
    assert [(x["rung"], x["outcome"]) for x in third] == [("too-greedy", "CUDA_OOM"), ("plain", "READY")]


def test_bad_serial_is_bad_input_before_any_host(sandbox, state, tmp_path):
    book = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-bad", serve=P2P_OFF)
    for args in (("--serial", "0,2"), ("--serial", "two"), ("--max-fail", "lots")):
        proc = inv(sandbox, "deploy", "--host", "sbx1", "--host", "sbx2", "--playbook", str(book), "--json", "--yes",
                   *args,
                   env={"FLEET_STATE_DIR": str(state)})
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert args[0] in proc.stderr and "probing" not in proc.stderr


def test_a_canary_that_serves_only_by_falling_back_stops_a_playbook_change_before_the_next_batch(sandbox, state,
                                                                                                 sandbox_inventory,
                                                                                                 tmp_path):
    """Issue 52, 3: the change is the playbook, not the versions: its first rung runs out of memory on the canary,
    which falls back to the next rung and serves. That is no canary that passed: the rollout stops after it, the
    later batch never touched (before: the canary counted as passed and every host ran on the fall-back)."""
    book = llama_playbook(tmp_path, [{"name": "greedy", "flags": {"mem-fraction-static": 0.99}}, {"name": "plain"}],
                          name="llama-canary-oom", serve=P2P_OFF)
    before = {h: releases(sandbox_inventory, h) for h in HOSTS}
    rc, data, err = rollout(sandbox, state, book, "--serial", "1,2")
    assert rc == 1, err[-3000:]
    one, *rest = data["hosts"]
    assert one["status"] == "ok" and [(a["rung"], a["outcome"]) for a in one["attempts"]] == [
        ("greedy", "CUDA_OOM"), ("plain", "READY")]
    assert [(h["host"], h["status"]) for h in rest] == [("sbx2", "skipped"), ("sbx3", "skipped")]
    assert [(b["status"], b.get("canary")) for b in data["batches"]] == [("failed", True), ("skipped", None)]
    assert data["batches"][0]["fell_back"] == ["sbx1 served on rung plain after greedy (CUDA_OOM) failed"]
    assert data["stopped"] == ("a canary that fell back or deployed nothing is no change that passed after batch 1 "
                               "of 2 (the canary: sbx1 served on rung plain after greedy (CUDA_OOM) failed); "
                               "batch 2 not started")
    for h in ("sbx2", "sbx3"):
        assert releases(sandbox_inventory, h) == before[h]
        assert f"{h} probing" not in err  # never contacted


def test_a_canary_left_unchanged_deployed_nothing_and_stops_the_rollout(sandbox, state, sandbox_inventory,
                                                                       tmp_path):
    """Issue 52, 4: the canary already serves the new playbook (deployed there alone before), so the rollout's
    canary deploys nothing and proves nothing: it stops after it, the later batch never touched (before: an
    `unchanged` canary passed and the change ran unguarded on the rest)."""
    book = llama_playbook(tmp_path, [{"name": "plain", "env": {"CANARY_TEST": "1"}}], name="llama-canary-same",
                          serve=P2P_OFF)
    rc, data, err = rollout(sandbox, state, book, hosts=["sbx1"])
    assert rc == 0 and data["status"] == "ok", err[-3000:]  # one host: its own result
    before = {h: releases(sandbox_inventory, h) for h in HOSTS}
    rc, data, err = rollout(sandbox, state, book, "--serial", "1,2")
    assert rc == 1, err[-3000:]
    one, *rest = data["hosts"]
    assert one["status"] == "unchanged"
    assert [(h["host"], h["status"]) for h in rest] == [("sbx2", "skipped"), ("sbx3", "skipped")]
    assert data["stopped"] == ("a canary that fell back or deployed nothing is no change that passed after batch 1 "
                               f"of 2 (the canary: sbx1 unchanged (release {one['release']} already served this "
                               "playbook: nothing was tried)); batch 2 not started")
    for h in HOSTS:
        assert releases(sandbox_inventory, h) == before[h]
    for h in ("sbx2", "sbx3"):
        assert f"{h} probing" not in err
