"""`inv tune --slo` with a playbook that has no ladder, interrupted by Ctrl-C after its first trial, leaves sbx0 on
the release it served before, and `inv tune --slo` again resumes the search from the trials already measured (the
journal on the controller), then deploys its winner, removes the journal and teaches the fleet the winner for
the fingerprint (`inv learned`)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import fleetcli
import simmodel
import yaml
from fleetcli import glm5_playbook, inv, sh

SPACE = {"max-running-requests": [1024, 16], "attention-backend": ["triton"], "chunked-prefill-size": [16384]}
ARGS = ("--host", "sbx0", "--yes", "--slo", "ttft_p99=750ms", "--budget", "4", "--requests", "100")
ENV = {"SGLANG_SIM_TOKEN_TIME_SCALE": "0.3"}
TRIED = ("max-running-requests-16", "attention-backend-triton", "chunked-prefill-size-16384")  # after the base


def test_a_tune_interrupted_after_a_trial_puts_back_what_served_and_the_next_tune_resumes_it(
        sandbox, sandbox_inventory, tmp_path):
    book = glm5_playbook(tmp_path, "glm5-slo-resume", tune=SPACE,
                         serve={"unit": "sglang", "port": 30000,
                                "env": {"NCCL_P2P_DISABLE": "1",
                                        "SGLANG_SIM_TOKEN_TIME_SCALE": {"env": "SGLANG_SIM_TOKEN_TIME_SCALE"}}},
                         bench={"input_len": 16384, "output_len": 4, "timeout": 120})
    written = yaml.safe_load(book.read_text())
    del written["ladder"]  # a playbook with no ladder at all: the search finds the configuration
    book.write_text(yaml.safe_dump(written, sort_keys=False))
    before = sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current || true").strip()
    proc = inv(sandbox, "tune", "--playbook", str(book), *ARGS, "--json", wait=False, env=ENV)
    said = []
    assert proc.stderr is not None
    for line in proc.stderr:  # the base's full search ends, the journal is written, the next trial starts
        said.append(line)
        if any(f"slo-{name}" in line for name in TRIED):
            break
    else:
        raise AssertionError("".join(said)[-3000:])
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, (out[-500:], err[-3000:])
    assert sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current || true").strip() == before
    journals = list((Path(os.environ["FLEET_STATE_DIR"]) / "tune").glob("sbx0-*.json"))
    assert len(journals) == 1, err[-3000:]
    kept = json.loads(journals[0].read_text())["seen"]
    assert kept and kept[0]["flags"] == [] and kept[0]["full"]  # the base, measured in full

    rc, data, err = fleetcli.inv_json(sandbox, "tune", "--playbook", str(book), *ARGS, env=ENV)
    assert rc == 0 and data["status"] == "ok", err[-4000:]
    assert data["resumed"] == len(kept) and "resuming the search" in err
    assert data["trials"][0]["flags"] == {} and data["trials"][0]["why"].endswith("(before the resume)")
    names = [t["name"] for t in data["trials"] if not t["why"].startswith("replicate")]
    assert len(names) == len(set(names)) <= 4  # no trial measured twice; the budget counts the earlier ones
    assert sh(sandbox_inventory, "sbx0", "readlink /var/lib/fleet/current").strip().endswith(data["release"])
    assert not journals[0].exists()
    # what it found is the fleet's for this hardware: the next search of it starts the winner after the base
    learned = json.loads(inv(sandbox, "learned", "--json").stdout)["slo"]
    mine = [e for e in learned if e["playbook"] == "glm5-slo-resume"]
    assert len(mine) == 1 and mine[0]["fingerprint"] == data["fingerprint"] and mine[0]["slo"] == "ttft_p99=750ms"
    assert [(w["host"], w["release"]) for w in mine[0]["wins"]] == [("sbx0", data["release"])]
    assert mine[0]["wins"][0]["flags"] == yaml.safe_load(data["rung"])[0]["flags"]
    measured = [(t["name"], t["short_rate"], t["rate"], t["full"], t["why"]) for t in data["trials"]]
    print(json.dumps(measured), data["winner"], data["comparison"])  # figures, also on a failure
    rates = simmodel.slo_rates(SPACE, 16384, 0.75, 100, 0.3)  # the model's best, from the model's own data
    rung = yaml.safe_load(data["rung"])[0]
    assert simmodel.config(rung["flags"]) in simmodel.near_best(rates), (rung["flags"], measured, rates)
