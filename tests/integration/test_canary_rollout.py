"""`inv deploy --serial 1,2 --canary` on sandbox hosts: a release whose greedy answers differ from the old
release's fails its canary before any traffic, and its canary host is put back on the release before, serving;
the later batches are never touched (sandbox/sim/README.md: SGLANG_SIM_ANSWERS plays the new numerics)."""

from __future__ import annotations

import json
import threading
import time

from fleetcli import BUDGETS, inv_json, llama_playbook, sh, write_book

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


# Four replicas behind the real router on sbx0; sbx4's profile is a copy of sbx2's (tests/conftest.py: bare_profile),
# so the canary sbx2 has a baseline of its own hardware although the later batches begin with other GPUs.
ROUTER = "sbx0"
REPLICAS = ["sbx2", "sbx1", "sbx3", "sbx4"]
KEY = "canary-router-key"
JITTER = {"NCCL_P2P_DISABLE": "1", "SGLANG_SIM_JITTER": "0.1"}  # each request's delays spread, as on a real GPU
# short looks for a test: 20 s each, 40 s at most, 4 requests a second a host; the tail at p90 (p99 wants
# thousands of requests a side: bench/bench_canary_judge.py is where the p99 is measured)
WINDOW = {"window": 20, "max_window": 40, "rate": 4, "tail": 0.9}


def routed_book(tmp_path, env):
    return write_book(tmp_path, {
        "name": "llama-canary-dp", "model": {"path": "/models/Llama-3.1-8B-Instruct"},
        "serve": {"host": "0.0.0.0", "port": 30000, "api_key": {"env": "SGLANG_API_KEY"}, "env": env},
        "flags": {"tp-size": 1}, "ladder": [{"name": "plain"}], "budgets": {**BUDGETS, "start": 12, "weight_load": 12},
        "router": {"host": ROUTER, "port": 30080, "policy": "round_robin",
                   "flags": {"health-check-interval-secs": 2}},
        "canary": WINDOW})


def routed(sandbox, state, book, *args):
    picks = [a for h in REPLICAS for a in ("--host", h)]
    return inv_json(sandbox, "deploy", *picks, "--playbook", str(book), "--yes", "--serial", "1,3", *args,
                    env={"SGLANG_API_KEY": KEY, "FLEET_STATE_DIR": str(state)})


def workers(inventory) -> list[str]:
    out = sh(inventory, ROUTER, f"curl -s -H 'Authorization: Bearer {KEY}' http://127.0.0.1:30080/workers")
    return sorted(w["url"] for w in json.loads(out)["workers"])


def test_behind_the_router_an_identical_release_passes_and_a_slower_one_fails_and_is_put_back(
        _sandbox_session, sandbox_inventory, tmp_path):
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    state = tmp_path / "state"
    every = sorted(f"http://{sandbox_inventory.hosts[h].address}:30000" for h in REPLICAS)
    rc, data, err = routed(sandbox, state, routed_book(tmp_path, JITTER))
    assert rc == 0, err[-3000:]
    assert workers(sandbox_inventory) == every
    # A/A: a release that changes nothing the server does passes its canary and the rollout goes on
    same = routed_book(tmp_path, {**JITTER, "FLEET_TEST_NOTE": "a release alike"})
    rc, data, err = routed(sandbox, state, same, "--canary")
    assert rc == 0, err[-3000:]
    judged = data["judged"]
    assert judged["ok"] and judged["verdict"]["decision"] == "pass", judged
    assert judged["baselines"] == ["sbx4"]  # sbx1, first of the later batches, has other GPUs
    assert [h["status"] for h in data["hosts"]] == ["ok"] * 4, data["hosts"]
    passed = {h["host"]: h["release"] for h in data["hosts"]}
    # 30% slower on every request (SGLANG_SIM_SLOWER): the judge fails it, the canary goes back, the rest wait
    slower = routed_book(tmp_path, {**JITTER, "FLEET_TEST_NOTE": "a release alike", "SGLANG_SIM_SLOWER": "0.30"})
    rc, data, err = routed(sandbox, state, slower, "--canary")
    assert rc == 1, err[-3000:]
    verdict = data["judged"]["verdict"]
    assert verdict["decision"] == "fail" and data["judged"]["numerics"]["ok"]
    failed = [m for m in verdict["metrics"] if m["decision"] == "fail"]
    assert failed and all(m["metric"] in ("ttft", "tpot", "e2e") and m["estimate"] >= 0.05 for m in failed), failed
    one, *rest = data["hosts"]
    assert one["host"] == "sbx2" and one["status"] == "failed"
    assert one["error"].endswith(f"put back on release {passed['sbx2']}"), one["error"]
    assert [h["status"] for h in rest] == ["skipped"] * 3
    assert sh(sandbox_inventory, "sbx2", "readlink /var/lib/fleet/current").strip().endswith(passed["sbx2"])
    assert workers(sandbox_inventory) == every  # every replica serves, the canary back in the router


XID79 = ("b=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0) && s=${b#0000} && s=${s%.0} && "
         "echo \"[ 902.1] NVRM: Xid (PCI:$s): 79, pid=1, GPU has fallen off the bus.\" >> /run/fleet-sim/kmsg")


def test_a_hardware_xid_on_the_canary_during_its_window_fails_it(_sandbox_session, sandbox_inventory, tmp_path):
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    state = tmp_path / "state"
    hosts = ["sbx2", "sbx4", "sbx3"]  # the canary sbx2 and its baseline sbx4 of the same hardware

    def deploy(book, *args):
        picks = [a for h in hosts for a in ("--host", h)]
        return inv_json(sandbox, "deploy", *picks, "--playbook", str(book), "--yes", "--serial", "1,2", *args,
                        env={"FLEET_STATE_DIR": str(state)})

    rc, data, err = deploy(llama_playbook(tmp_path, [{"name": "plain"}], name="llama-canary-xid", flags={"tp-size": 1},
                                          serve={"env": JITTER}))
    assert rc == 0, err[-3000:]
    before = {h["host"]: h["release"] for h in data["hosts"]}
    new = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-canary-xid", flags={"tp-size": 1},
                         serve={"env": {**JITTER, "FLEET_TEST_NOTE": "a release alike"}}, canary=WINDOW)
    injected = threading.Event()

    def xid_once_the_window_runs():  # canary_load.py load runs (python -c PROGRAM load PORT): the window is open;
        # [l]: the pattern must not match the shell that runs pgrep (it did: the Xid came before the window)
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and not injected.is_set():
            if sh(sandbox_inventory, "sbx2", "pgrep -f ' [l]oad 30000 ' >/dev/null && echo on || true").strip() == "on":
                sh(sandbox_inventory, "sbx2", XID79)
                injected.set()
                return
            time.sleep(1)

    watcher = threading.Thread(target=xid_once_the_window_runs, daemon=True)
    watcher.start()
    rc, data, err = deploy(new, "--canary")
    injected.set()
    watcher.join(10)
    assert rc == 1, err[-3000:]
    judged = data["judged"]
    assert judged["numerics"]["ok"] and judged["baselines"] == ["sbx4"]
    assert judged["faults"] and judged["faults"][0].startswith("sbx2: Xid 79"), judged
    assert judged["reasons"][0].startswith("hardware fault on a canary: sbx2: Xid 79")
    assert judged["verdict"]["look"] == 1  # the look that saw it ends the window
    one, *rest = data["hosts"]
    assert one["host"] == "sbx2" and one["status"] == "failed", one
    # the Xid line alone (the stand-in still lists the GPU): the release before starts and serves again
    assert one["error"].endswith(f"put back on release {before['sbx2']}"), one["error"]
    assert sh(sandbox_inventory, "sbx2", "readlink /var/lib/fleet/current").strip().endswith(before["sbx2"])
    assert [h["status"] for h in rest] == ["skipped", "skipped"]
