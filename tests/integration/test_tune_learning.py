"""Issue 52, finding 2, on the sandbox: what a tune decides is what the fleet learns. A tune on one host said
`no-cuda-graph +10 tok/s is within noise: plain stays` and rolled back, yet the fingerprint's winner became
`no-cuda-graph` (the raw highest tok/s), and every later deploy on that fingerprint served it.

Here the ladder's first rung is made 3% slower by the simulator (SGLANG_SIM_SLOWER, data the simulated release
plays, never read by fleet), so the second measures faster, by far less than the playbook's min_gain (50%): the
tune keeps the first, and `inv learned` and the next deploy's plan must say the same rung (the raw highest tok/s,
the rule before, made it the second)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from fleetcli import inv_at, llama_playbook

HOST = "sbx1"  # 8x H100: a profile without a performance model, so the 3% is the only difference
NO_P2P = {"NCCL_P2P_DISABLE": "1"}
LADDER = [{"name": "plain", "env": {**NO_P2P, "SGLANG_SIM_SLOWER": "0.03"}},
          {"name": "other", "env": {**NO_P2P}}]
BENCH = {"gate": True, "input_len": 32, "output_len": 16, "num_prompts": 64, "max_concurrency": 64,
         "fraction": 0.5, "floor": 50, "timeout": 120, "min_gain": 0.5}


def _inventory(sandbox, tmp_path: Path) -> Path:
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"] = {HOST: doc["hosts"][HOST]}
    path = tmp_path / "inventory" / "hosts.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_rung_a_tune_keeps_within_noise_is_the_one_the_fleet_learns_and_deploys(sandbox, tmp_path):
    inventory = _inventory(sandbox, tmp_path)
    book = llama_playbook(tmp_path, LADDER, name="llama-noise", bench=BENCH)
    env = {"FLEET_STATE_DIR": str(tmp_path / "state")}

    proc = inv_at(inventory, "tune", "--host", HOST, "--playbook", str(book), "--yes", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tuned = json.loads(proc.stdout)
    rows = {a["rung"]: a for a in tuned["attempts"]}
    assert {rows["plain"]["outcome"], rows["other"]["outcome"]} <= {"READY", "PERF_REGRESSION"}, rows
    winner = tuned["winner"]
    # 3% against a min_gain of 50%
    assert winner == "plain", proc.stderr[-3000:]

    learned = inv_at(inventory, "learned", "--host", HOST, "--playbook", "llama-noise", "--json", env=env)
    assert learned.returncode == 0, learned.stderr[-2000:]
    fleet_rows = {r["rung"]: r for r in json.loads(learned.stdout)["results"]}
    assert [r for r, row in fleet_rows.items() if row["winner"]] == [winner], fleet_rows
    assert "within noise" in fleet_rows[winner]["why"] or "first rung" in fleet_rows[winner]["why"]

    plan = inv_at(inventory, "deploy", "--host", HOST, "--playbook", str(book), "--dry-run", "--json", env=env)
    assert plan.returncode == 0, plan.stderr[-2000:]
    planned = json.loads(plan.stdout)
    planned = planned["hosts"][0] if "hosts" in planned else planned
    assert planned["config"]["rung"] == winner, planned
