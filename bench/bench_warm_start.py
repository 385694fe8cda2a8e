"""Cold and warm starts across a rolling deploy (issue 49): every host of the instance is one kind (one cache key),
their own caches removed; `inv deploy --serial 1` with `serve.warm_start: true` and an empty store. The first host
starts cold (flashinfer's attention modules JIT-built: the profile's modelled `jit_attention_seconds`) and gives
its caches to the store; every later host gets them placed. Then the first host is deployed again (--restarts, 2 by
default): a restart, the store's entry (its own caches) placed again. Per host and restart: the start in modelled
seconds (the server's journal from its first line to `The server is fired up`, divided by the time scale) and its
ratio to the first.

usage: FLEET_SANDBOX_INSTANCE=dev4 inv sandbox.up --hosts 8 --profile rtx-pro-6000-x8-proxmox
       FLEET_SANDBOX_INSTANCE=dev4 python3 bench/bench_warm_start.py [--scale 0.05] [--restarts 2]   (a table, then
       one JSON line)

Measured 2026-12-05 on dev4 (8 rtx-pro-6000-x8-proxmox hosts, llama TP2, scale 0.05, 2 cores shared; 3 runs, code of
h-rev49c; a root unit): cold starts 297, 297, 299 s modelled; the 21 warm second hosts 57-60 s, their ratio to
their run's cold start 0.195 on average (95% t-interval 0.194-0.196, hosts taken as independent; range
0.191-0.201); the 6 restarts of the first host 59-60 s, 0.199 (0.198-0.200; range 0.199-0.201): all within the
issue's 0.30. The rolling deploy took 72.6, 80.5, 79.1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet import inventory  # noqa: E402
from fleet.host.service import sh  # noqa: E402
from fleet.ssh.connect import open_connection  # noqa: E402
from sandbox.config import config  # noqa: E402

BUDGETS = {"start": 30, "weight_load": 60, "jit_compile": 60, "autotune": 60, "graph_capture": 60, "ready": 60,
           "stop": 30}
FRESH = "rm -rf /root/.cache/flashinfer /root/.triton /tmp/torchinductor_root"
READY_LINE = "The server is fired up"


def modelled_start(journal: str, scale: float) -> float:
    lines = [(float(line.split(" ", 1)[0]), line) for line in journal.splitlines() if line[:1].isdigit()]
    ready = max(i for i, (_, text) in enumerate(lines) if READY_LINE in text)
    first = max((i for i in range(ready) if "Attention backend" in lines[i][1]), default=0)
    return (lines[ready][0] - lines[first][0]) / scale


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--restarts", type=int, default=2, help="deploys of the first host again after the rolling one")
    args = ap.parse_args()
    cfg = config()
    doc = yaml.safe_load(Path(cfg.inventory_path).read_text())
    for name in doc["hosts"]:
        doc["hosts"][name].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = str(args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "inventory" / "hosts.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        inv = inventory.load(path)
        book = {"name": "llama-warm", "model": {"path": "/models/Llama-3.1-8B-Instruct"}, "flags": {"tp-size": 2},
                "ladder": [{"name": "plain"}], "budgets": BUDGETS, "bench": {"gate": False},
                "serve": {"env": {"NCCL_P2P_DISABLE": "1"}, "warm_start": True}}
        (folder / "llama-warm.yaml").write_text(yaml.safe_dump(book, sort_keys=False))
        conns = {n: open_connection(h) for n, h in inv.hosts.items()}
        for n, h in inv.hosts.items():
            sh(conns[n], h, FRESH)
        since = time.time() - 1
        cmd = [str(REPO / ".venv/bin/inv"), "deploy", "-i", str(path), "--playbook", str(folder / "llama-warm.yaml"),
               "--all", "--serial", "1", "--force", "--yes"]
        start = time.monotonic()
        env = {**os.environ, "FLEET_STATE_DIR": str(folder / "state")}
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600, env=env)
        took = time.monotonic() - start
        if done.returncode != 0:
            sys.exit(f"deploy failed (exit {done.returncode}): {done.stderr[-3000:]}")
        rows = {}
        for n, h in inv.hosts.items():
            journal = sh(conns[n], h, "journalctl -q --no-pager -o short-unix _SYSTEMD_UNIT=sglang.service "
                                      f"--since @{since:.0f}")
            rows[n] = modelled_start(journal, args.scale)
        order = sorted(rows, key=lambda n: int(n.lstrip("sbx")))
        first = rows[order[0]]  # --serial 1 goes in the inventory's order: the first host starts cold
        restarts = []  # the first host deployed again: a restart on the caches it built itself
        for _ in range(args.restarts):
            since = time.time() - 1
            again = subprocess.run([*cmd[:6], "--host", order[0], "--force", "--yes"], cwd=REPO, capture_output=True,
                                   text=True, timeout=1800, env=env)
            if again.returncode != 0:
                sys.exit(f"restart deploy failed (exit {again.returncode}): {again.stderr[-3000:]}")
            journal = sh(conns[order[0]], inv.hosts[order[0]], "journalctl -q --no-pager -o short-unix "
                         f"_SYSTEMD_UNIT=sglang.service --since @{since:.0f}")
            restarts.append(modelled_start(journal, args.scale))
        print(f"{'host':8} {'modelled start s':>17} {'of the first':>13}")
        for n in order:
            print(f"{n:8} {rows[n]:17.0f} {rows[n] / first:13.2f}")
        for i, r in enumerate(restarts, 1):
            print(f"{order[0] + ' r' + str(i):8} {r:17.0f} {r / first:13.2f}")
        print(json.dumps({"scale": args.scale, "deploy_s": round(took, 1),
                          "modelled_start_s": {n: round(rows[n]) for n in order},
                          "restarts_s": [round(r) for r in restarts]}))


if __name__ == "__main__":
    main()
