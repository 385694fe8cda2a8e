"""A playbook spanning two sandbox hosts (`nodes:`): sglang's --nnodes/--node-rank/--dist-init-addr, deployed,
watched and rolled back as one. sbx2 and sbx4 both have 2 RTX 5090s: TP 4 = 2 GPUs per node."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from fleetcli import BUDGETS, REPO, inv, inv_json, llama_playbook, sh, write_book

NODES = ["sbx2", "sbx4"]
FILES = "/etc/systemd/system/sglang.service /etc/fleet/sglang.env"


def two_node_book(tmp_path, name: str, dist_port: int = 5757, **extra):
    return write_book(tmp_path, {
        "name": name, "model": {"path": "/models/Llama-3.1-8B-Instruct"},
        "serve": {"unit": "sglang", "env": {"NCCL_P2P_DISABLE": "1"}},
        "nodes": {"count": 2, "dist_port": dist_port},
        "flags": {"tp-size": 4, "dist-timeout": 600},  # 600 s of modelled time: 12 s in the sandbox
        "ladder": [{"name": "tp4-2nodes"}], "budgets": {**BUDGETS, "start": 40}, **extra})


def changed_inventory(sandbox, tmp_path, env: dict[str, dict[str, str]]) -> Path:
    """The sandbox inventory with more per-host env, in a folder of its own (every *.yaml beside it is inventory)."""
    inventory = yaml.safe_load(sandbox.cfg.inventory_path.read_text())
    for name, extra in env.items():
        inventory["hosts"][name]["vars"]["env"].update(extra)
    path = tmp_path / "inventory" / "hosts.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(inventory))
    return path


class deploy_with:  # noqa: N801 - reads as the call it makes
    """`inv deploy --json` of both nodes against another inventory, waited for or in the background."""

    def __init__(self, inventory: Path, book: Path):
        self.cmd = [str(REPO / ".venv/bin/inv"), "deploy", "-i", str(inventory), "--host", "sbx2", "--host", "sbx4",
                    "--playbook", str(book), "--json", "--yes"]

    def run(self) -> subprocess.CompletedProcess:
        return subprocess.run(self.cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)

    def start(self) -> subprocess.Popen:
        return subprocess.Popen(self.cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)


def deploy(sandbox, book, *hosts, extra=()):
    args = [a for h in hosts for a in ("--host", h)]
    return inv_json(sandbox, "deploy", *args, "--playbook", str(book), "--yes", *extra)


def state(inventory, name) -> str:
    """What a node is on: sha256 of unit and env, the current release, the releases kept."""
    return sh(inventory, name, f"sha256sum {FILES} 2>&1; readlink /var/lib/fleet/current; "
                               "ls /var/lib/fleet/releases 2>/dev/null")


@pytest.fixture(scope="module")
def served(_sandbox_session, tmp_path_factory):
    sandbox, profiles = _sandbox_session
    sandbox.up(len(profiles), profiles)
    book = two_node_book(tmp_path_factory.mktemp("books"), "llama-2node")
    rc, data, err = deploy(sandbox, book, *NODES)
    yield {"rc": rc, "data": data, "stderr": err, "book": book, "sandbox": sandbox}
    from fleet import inventory as inventory_mod

    inv_ = inventory_mod.load(sandbox.cfg.inventory_path)
    for name in NODES:  # the other modules deploy single-host playbooks here, which a node's release refuses
        sh(inv_, name, "systemctl stop sglang 2>/dev/null; rm -rf /var/lib/fleet/releases /var/lib/fleet/current")


def test_the_wrong_number_of_hosts_is_bad_input_and_touches_nothing(sandbox, sandbox_inventory, tmp_path):
    book = two_node_book(tmp_path, "llama-2node-count")
    before = {n: state(sandbox_inventory, n) for n in [*NODES, "sbx1"]}
    for hosts in (NODES[:1], [*NODES, "sbx1"]):
        proc = inv(sandbox, "deploy", *[a for h in hosts for a in ("--host", h)], "--playbook", str(book), "--yes")
        assert proc.returncode == 2, proc.stderr
        assert f"give exactly 2 hosts with --host/--group, rank 0 first; got {len(hosts)}" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1  # one line
    assert {n: state(sandbox_inventory, n) for n in [*NODES, "sbx1"]} == before


def test_two_nodes_serve_one_model_through_rank_0(served, sandbox_inventory):
    assert served["rc"] == 0, served["stderr"][-3000:]
    results = served["data"]["hosts"]
    assert [r["host"] for r in results] == NODES and {r["status"] for r in results} == {"ok"}
    assert len({r["release"] for r in results}) == 1  # one deployment id on every node
    addr = f"{sandbox_inventory.hosts['sbx2'].address}:5757"
    for rank, name in enumerate(NODES):
        nodes = results[rank]["config"]["nodes"]
        assert (nodes["rank"], nodes["count"], nodes["dist_init_addr"]) == (rank, 2, addr)
        unit = sh(sandbox_inventory, name, "cat /etc/systemd/system/sglang.service")
        assert f"--nnodes 2 --node-rank {rank} --dist-init-addr {addr}" in unit
        assert sh(sandbox_inventory, name, "systemctl is-active sglang").strip() == "active"
    out = sh(sandbox_inventory, "sbx2", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")
    # node 1 runs schedulers only: sglang's dummy health server, no API
    assert sh(sandbox_inventory, "sbx4", "curl -s -o /dev/null -w '%{http_code}' "
                                         "http://127.0.0.1:30000/health").strip() == "200"
    assert sh(sandbox_inventory, "sbx4", "curl -s -o /dev/null -w '%{http_code}' -d '{}' "
                                         "http://127.0.0.1:30000/generate").strip() == "404"
    journal = sh(sandbox_inventory, "sbx4", "journalctl -u sglang -o cat --no-pager | tail -n 200")
    assert "Dummy health check server started in background thread at 127.0.0.1:30000" in journal
    assert "spans across nodes" in journal


def test_deploying_it_again_changes_nothing(served, sandbox_inventory):
    pids = [sh(sandbox_inventory, n, "systemctl show -p MainPID --value sglang").strip() for n in NODES]
    rc, data, _ = deploy(served["sandbox"], served["book"], *NODES)
    assert rc == 0 and [r["status"] for r in data["hosts"]] == ["unchanged", "unchanged"]
    assert [sh(sandbox_inventory, n, "systemctl show -p MainPID --value sglang").strip() for n in NODES] == pids


def test_a_node_is_never_rolled_back_deployed_or_tuned_as_a_host_alone(served, sandbox_inventory, tmp_path):
    """`inv rollback` without --playbook would roll each node back alone with a health check rank 1 cannot
    answer; a single-host playbook deployed or tuned onto a node would leave the other node without it. Each
    is refused on the node's row before anything changes."""
    sandbox = served["sandbox"]
    assert served["rc"] == 0, served["stderr"][-3000:]
    before = {n: state(sandbox_inventory, n) for n in NODES}
    rc, data, err = inv_json(sandbox, "rollback", "--host", "sbx2", "--host", "sbx4", "--yes")
    assert rc == 1, err[-2000:]
    for r, rank in zip(data["hosts"], (0, 1), strict=True):
        assert f"is node {rank} of 2 of the multi-node deployment of llama-2node (sbx2, sbx4)" in r["error"], r
        assert "rolled back together" in r["error"]
    single = llama_playbook(tmp_path, [{"name": "plain"}], name="llama-single")
    rc, data, err = deploy(sandbox, single, "sbx4")
    assert rc == 1 and "is node 1 of 2 of the multi-node deployment of llama-2node" in data["error"], err[-2000:]
    assert "nothing was changed" in data["error"]
    proc = inv(sandbox, "tune", "--host", "sbx4", "--playbook", str(single), "--yes")
    assert proc.returncode == 1 and "tuning it alone would restart one node" in proc.stderr + proc.stdout
    assert {n: state(sandbox_inventory, n) for n in NODES} == before


def test_dry_run_shows_each_nodes_unit_and_touches_nothing(served, sandbox_inventory, tmp_path):
    book = two_node_book(tmp_path, "llama-2node-dry", dist_port=5759)
    before = {n: state(sandbox_inventory, n) for n in NODES}
    rc, data, _ = deploy(served["sandbox"], book, *NODES, extra=("--dry-run",))
    assert rc == 0 and [r["status"] for r in data["hosts"]] == ["dry-run", "dry-run"]
    addr = f"{sandbox_inventory.hosts['sbx2'].address}:5759"
    for rank, r in enumerate(data["hosts"]):
        assert "+ExecStart=" in r["diff"] and f"--node-rank {rank} --dist-init-addr {addr}" in r["diff"]
    assert {n: state(sandbox_inventory, n) for n in NODES} == before


def test_a_node_that_cannot_reach_rank_0_fails_the_deployment_and_every_node_rolls_back(
        served, sandbox_inventory, tmp_path):
    """The new deployment's dist port is unreachable from node 1 (a firewall): rank 0 waits for it in vain and
    fails with torch's store timeout; both nodes end on the release they had, serving again."""
    assert served["rc"] == 0
    sandbox = served["sandbox"]
    book = two_node_book(tmp_path, "llama-2node-blocked", dist_port=5758)
    before = {n: state(sandbox_inventory, n) for n in NODES}
    rank0 = sandbox_inventory.hosts["sbx2"].address
    rule = ["ip", "netns", "exec", sandbox.cfg.netns("sbx4"), "ip", "rule"]
    block = ["to", f"{rank0}/32", "ipproto", "tcp", "dport", "5758", "prohibit"]
    subprocess.run([*rule, "add", *block], check=True)
    try:
        rc, data, err = deploy(sandbox, book, *NODES)
    finally:
        subprocess.run([*rule, "del", *block], check=True)
    assert rc == 1, err[-3000:]
    previous = served["data"]["hosts"][0]["release"]
    for r in data["hosts"]:
        assert (r["status"], r["release"]) == ("rolled_back", previous), r
        attempt = r["attempts"][-1]
        assert attempt["outcome"] == "COMM_FAILURE", attempt
        assert ("waiting for clients" in attempt["evidence"]
                or "The client socket has timed out" in attempt["evidence"]), attempt
    for name in NODES:
        now, old = state(sandbox_inventory, name).splitlines(), before[name].splitlines()
        assert now[:3] == old[:3], name  # unit and env byte for byte, `current` as it was
        assert set(now[3:]) - set(old[3:]) == {_failed_release(sandbox_inventory, name)}  # kept for the record
    out = sh(sandbox_inventory, "sbx2", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")


def _failed_release(inventory, name) -> str:
    """The newest release on the node whose manifest says it failed."""
    out = sh(inventory, name, "grep -l '\"status\": \"failed\"' /var/lib/fleet/releases/*/manifest.json")
    return sorted(out.split())[-1].split("/")[-2]


def test_a_node_that_fails_preflight_leaves_every_node_untouched(served, sandbox_inventory, tmp_path):
    book = two_node_book(tmp_path, "llama-2node-nomodel", dist_port=5760)
    before = {n: state(sandbox_inventory, n) for n in NODES}
    config = "/models/Llama-3.1-8B-Instruct/config.json"
    sh(sandbox_inventory, "sbx4", f"mv {config} {config}.away")
    try:
        rc, data, _ = deploy(served["sandbox"], book, *NODES)
    finally:
        sh(sandbox_inventory, "sbx4", f"mv {config}.away {config}")
    assert rc == 1
    for r in data["hosts"]:
        assert r["status"] == "failed" and "can run on all 2 nodes; nothing was changed" in r["error"], r
    sbx4 = data["hosts"][1]["attempts"]
    assert sbx4 and sbx4[0]["outcome"] == "PREFLIGHT" and "no config.json" in sbx4[0]["evidence"]
    assert {n: state(sandbox_inventory, n) for n in NODES} == before


def test_the_ladder_moves_on_for_all_nodes_together(served, sandbox_inventory, tmp_path):
    """The first rung cannot start on either node (no third GPU from --base-gpu-id 1 with two per node); the
    second serves on both, and both record the same two attempts."""
    book = two_node_book(tmp_path, "llama-2node-ladder", ladder=[
        {"name": "gpu-offset", "flags": {"base-gpu-id": 1}}, {"name": "plain"}])
    rc, data, err = deploy(served["sandbox"], book, *NODES)
    assert rc == 0, err[-3000:]
    for r in data["hosts"]:
        assert r["status"] == "ok" and r["config"]["rung"] == "plain"
        assert [(a["rung"], a["outcome"] == "READY") for a in r["attempts"]] == [("gpu-offset", False),
                                                                                   ("plain", True)]
    assert data["hosts"][0]["attempts"][0]["evidence"] == data["hosts"][1]["attempts"][0]["evidence"]
    out = sh(sandbox_inventory, "sbx2", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")


def test_a_node_whose_server_cannot_start_fails_the_deployment_at_once(served, sandbox_inventory, tmp_path):
    """Node 1 sees no GPU (its inventory env hides them): its server exits at once, the watch on rank 0 (which
    would wait out the dist timeout) is stopped, and both nodes go back to the release they had."""
    sandbox = served["sandbox"]
    path = changed_inventory(sandbox, tmp_path, {"sbx4": {"CUDA_VISIBLE_DEVICES": "7"}})
    book = two_node_book(tmp_path, "llama-2node-nogpu", dist_port=5761, flags={"tp-size": 4})  # torch's 1800 s
    before = {n: state(sandbox_inventory, n) for n in NODES}
    current = sh(sandbox_inventory, "sbx2", "readlink /var/lib/fleet/current").strip().rsplit("/", 1)[-1]
    proc = deploy_with(path, book).run()
    assert proc.returncode == 1, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    for r in data["hosts"]:
        assert (r["status"], r["release"]) == ("rolled_back", current), r
        assert r["attempts"][-1]["evidence"].startswith("sbx4 (node 1): "), r["attempts"][-1]
        assert r["attempts"][-1]["seconds"] < 1800 * 0.02  # not the dist timeout: node 1's exit ended it
    for name in NODES:
        assert state(sandbox_inventory, name).splitlines()[:3] == before[name].splitlines()[:3]


def test_a_node_cut_off_mid_start_fails_the_deployment_and_the_next_deploy_recovers(
        served, sandbox_inventory, tmp_path):
    """sbx4's link goes down while the new deployment starts (slowly: 10x the sandbox's time scale): the watch
    on sbx4 is declared dead by the keepalive, the watch on rank 0 stops, sbx2 gets its previous release back
    byte for byte and is left stopped (alone, rank 0 would wait for a node that is gone). After the link heals, a deploy
    takes both nodes back to serving: sbx4's lock, left by a run that has ended, is recovered."""
    sandbox = served["sandbox"]
    slow = {"SGLANG_SIM_TIME_SCALE": "0.2"}
    path = changed_inventory(sandbox, tmp_path, {"sbx2": slow, "sbx4": slow})
    book = two_node_book(tmp_path, "llama-2node-cut", dist_port=5762)
    before = state(sandbox_inventory, "sbx2").splitlines()[:3]
    proc = deploy_with(path, book).start()
    try:
        deadline = time.monotonic() + 120
        while not sh(sandbox_inventory, "sbx4", "pgrep -f -- '--dist-init-addr [0-9.]*:5762' || true").strip():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
            time.sleep(0.5)
        sandbox.cut("sbx4")
        out, err = proc.communicate(timeout=300)
    finally:
        sandbox.heal("sbx4")
    assert proc.returncode == 1 and out.strip(), err[-3000:]
    sbx2, sbx4 = json.loads(out)["hosts"]
    assert sbx4["status"] == "failed" and "sbx4" in sbx4["error"] and "connection lost" in sbx4["error"], sbx4
    assert sbx2["status"] == "failed" and "the rollback failed too" in sbx2["error"], sbx2
    # alone it would wait for the lost rank holding its GPUs: it is left stopped, and says so
    assert "sbx4 could not go back, so the other nodes are left stopped" in sbx2["error"], sbx2
    assert sh(sandbox_inventory, "sbx2", "systemctl is-active sglang || true").strip() != "active"
    assert state(sandbox_inventory, "sbx2").splitlines()[:3] == before  # its files and `current` are back
    rc, data, err = deploy(sandbox, served["book"], *NODES, extra=("--force",))
    assert rc == 0 and [r["status"] for r in data["hosts"]] == ["ok", "ok"], err[-3000:]
    assert "recovered the lock of a dead run" in err
    out = sh(sandbox_inventory, "sbx2", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")


def test_rollback_takes_every_node_back_to_one_earlier_deployment(served, sandbox_inventory, tmp_path):
    """`inv rollback` of a multi-node playbook: both nodes back to the deployment before the current one (the
    same release id, byte for byte), started together and serving through rank 0. Given one node, or the nodes
    in another order, or a release one node lacks, it refuses before touching either."""
    sandbox = served["sandbox"]
    rc, data, err = deploy(sandbox, served["book"], *NODES)
    assert rc == 0, err[-3000:]
    earlier = data["hosts"][0]["release"]
    before = {n: state(sandbox_inventory, n).splitlines()[:3] for n in NODES}
    newer = two_node_book(tmp_path, "llama-2node", dist_port=5764)  # the same playbook, changed
    rc, data, err = deploy(sandbox, newer, *NODES)
    assert rc == 0 and {r["release"] for r in data["hosts"]} != {earlier}, err[-3000:]
    latest = data["hosts"][0]["release"]
    moved = {n: state(sandbox_inventory, n) for n in NODES}
    for hosts, why in ((NODES[:1], "give exactly 2 hosts"), (NODES[::-1], "give those hosts in that order")):
        proc = inv(sandbox, "rollback", *[a for h in hosts for a in ("--host", h)], "--playbook", str(newer),
                   "--yes")
        assert proc.returncode in (1, 2) and why in proc.stderr + proc.stdout, proc.stderr[-2000:]
    rc, data, err = inv_json(sandbox, "rollback", "--host", "sbx2", "--host", "sbx4", "--yes", "--playbook", str(newer),
                             "--to", "20000101T000000Z-nosuch")
    assert rc == 1 and all("no release 20000101T000000Z-nosuch" in r["error"] for r in data["hosts"]), data
    assert {n: state(sandbox_inventory, n) for n in NODES} == moved  # refused: nothing touched
    # sbx4's copy of the earlier env file is damaged: found after sbx2's files went back, so both nodes go
    # forward again to what they ran, and serve
    copy = f"/var/lib/fleet/releases/{earlier}/files/etc__fleet__sglang.env"
    sh(sandbox_inventory, "sbx4", f"cp -a {copy} /tmp/env.keep && echo TAMPERED=1 >> {copy}")
    rc, data, err = inv_json(sandbox, "rollback", "--host", "sbx2", "--host", "sbx4", "--yes", "--playbook", str(newer))
    sh(sandbox_inventory, "sbx4", f"mv /tmp/env.keep {copy}")
    assert rc == 1 and {r["release"] for r in data["hosts"]} == {latest}, (data, err[-3000:])
    for r in data["hosts"]:
        assert "sbx4 (node 1): release" in r["error"] and "damaged" in r["error"], r["error"]
        assert f"; back on {latest}" in r["error"], r["error"]
    assert {n: state(sandbox_inventory, n) for n in NODES} == moved
    out = sh(sandbox_inventory, "sbx2", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")
    rc, data, err = inv_json(sandbox, "rollback", "--host", "sbx2", "--host", "sbx4", "--yes", "--playbook", str(newer))
    assert rc == 0, err[-3000:]
    assert [(r["host"], r["status"], r["release"]) for r in data["hosts"]] == [(n, "ok", earlier) for n in NODES]
    assert {n: state(sandbox_inventory, n).splitlines()[:3] for n in NODES} == before
    for name in NODES:
        assert "--dist-init-addr" in sh(sandbox_inventory, name, "cat /etc/systemd/system/sglang.service")
        assert ":5757" in sh(sandbox_inventory, name, "cat /etc/systemd/system/sglang.service")
    out = sh(sandbox_inventory, "sbx2", "curl -s -d '{\"text\": \"2+2=\"}' http://127.0.0.1:30000/generate")
    assert json.loads(out)["text"].strip().startswith("4")
