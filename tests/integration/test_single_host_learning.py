"""A plain `inv deploy --host H` (no --serial) teaches what the fleet learned, as a rolling deploy does: on sbx3
(8x B200) a rung whose memory fraction leaves no room runs out of memory (CUDA_OOM, a class the hardware causes)
and the plain rung after it serves. One deploy: seen once, tried again first; two: the rung is skipped for this
fingerprint (`inv learned`; fleet.deploy.fingerprint.arrange's skip is tested in tests/unit), and `inv forget`
clears it. Before, a single-host deploy learned nothing."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from fleetcli import inv_at, llama_playbook

HOST = "sbx3"
LADDER = [{"name": "too-greedy", "env": {"NCCL_P2P_DISABLE": "1"}, "flags": {"mem-fraction-static": 0.99}},
          {"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}]


def _inventory(sandbox, tmp_path: Path) -> Path:
    """The sandbox's inventory with a fast simulated start, in a folder of its own."""
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {HOST: doc["hosts"][HOST]}
    doc["hosts"][HOST].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = "0.004"
    path = tmp_path / "inventory" / "hosts.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_single_host_deploy_teaches_the_fingerprint_and_its_own_repeated_oom_skips_nothing(sandbox, tmp_path):
    """Issue 52, 6: CUDA_OOM twice on one host (another tenant's memory, a re-run) is host-local until a second
    host of the fingerprint sees it: the rung is tried again, and `inv learned` says why."""
    inventory = _inventory(sandbox, tmp_path)
    book = llama_playbook(tmp_path, LADDER, name="llama-learns")
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}

    def run(*args):
        return inv_at(inventory, *args, env=env)

    def learned() -> dict[str, dict]:
        proc = run("learned", "--host", HOST, "--playbook", "llama-learns", "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        return {r["rung"]: r for r in json.loads(proc.stdout)["results"]}

    deploys = []
    for _ in range(3):
        proc = run("deploy", "--host", HOST, "--playbook", str(book), "--force", "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        data = json.loads(proc.stdout)
        assert [a["outcome"] for a in data["attempts"]] == ["CUDA_OOM", "READY"], data["attempts"]
        deploys.append(proc.stderr)
    assert f"{HOST} remembered rung plain as known-good for fingerprint" in deploys[0]
    assert "rung too-greedy: seen to fail on this hardware, not confirmed" in deploys[1]
    assert f"(CUDA_OOM seen 2x on {HOST} only: not known-bad until a second host): trying it again" in deploys[2]
    rows = learned()
    assert (rows["plain"]["served"], rows["plain"]["winner"]) == (3, True)
    assert rows["plain"]["why"] == "winner: the first rung of the ladder that serves (plain)"
    assert rows["too-greedy"]["failures"] == {"CUDA_OOM": 3} and rows["too-greedy"]["skipped"] is None
    assert rows["too-greedy"]["why"] == f"CUDA_OOM seen 3x on {HOST} only: not known-bad until a second host"

    # what it learned is cleared by the operator
    proc = run("forget", "--host", HOST, "--rung", "too-greedy", "--json")
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["forgotten"]) == 1, proc.stderr
    assert set(learned()) == {"plain"}
