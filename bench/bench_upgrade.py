"""What an upgrade of `packages:` pins costs, on sandbox hosts (the simulated stack as wheels, sandbox/sim/wheels.py),
through `inv` as an operator runs it:

- one host: a redeploy without pins (`--force`: stop, start, watch, health) is the baseline; an upgrade 0.5.9 ->
  0.5.23 (its venv built from a cold host: the new wheels sent, pip installs them) and a rollback (back to the
  0.5.9 venv, no install) as ratios of it;
- every host of the instance: a rolling redeploy without pins (`--serial 1,25% --force`) is the baseline; a
  rolling pinned upgrade 0.5.9 -> 0.5.23 with a canary (`--serial 1,25%`, every host building its venv) as a
  ratio of it.

usage: FLEET_SANDBOX_INSTANCE=dev4 inv sandbox.up --hosts 16 --profile h100-sxm-x8
       FLEET_SANDBOX_INSTANCE=dev4 python3 bench/bench_upgrade.py [--repeat 2]   (a table, then one JSON line)
It deploys over what the hosts serve and removes the venvs and wheels it made on them.

Measured 2026-12-03 on dev4 (16 h100-sxm-x8 hosts, 2 cores shared, load about 11; 1 run): one host, redeploy
15.7 s, upgrade 37.3 s (2.37x), rollback 17.7 s (1.13x); 16 hosts, rolling redeploy 71.4 s, pinned rolling
upgrade 182.2 s (2.55x: each host's venv built by pip, four hosts at a time on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet import inventory  # noqa: E402
from fleet.host import venvs  # noqa: E402
from sandbox.config import config  # noqa: E402
from sandbox.sim import wheels as simwheels  # noqa: E402

OLD = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}
NEW = {"sglang": "0.5.23", "flashinfer-python": "0.7.2", "torch": "2.14.1"}
BUDGETS = {"start": 20, "weight_load": 30, "jit_compile": 30, "autotune": 30, "graph_capture": 30, "ready": 30,
           "stop": 30}
CLEAN = f"rm -rf {venvs.VENVS} {venvs.WHEELS}"


def playbook(folder: Path, name: str, pins: dict[str, str] | None) -> Path:
    book = {"name": name, "model": {"path": "/models/Llama-3.1-8B-Instruct"}, "flags": {"tp-size": 2},
            "ladder": [{"name": "plain"}], "budgets": BUDGETS, "bench": {"gate": False},
            "serve": {"env": {"NCCL_P2P_DISABLE": "1"}}, **({"packages": pins} if pins else {})}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(book, sort_keys=False))
    return path


def inv(inventory_path: Path, *args: str) -> float:
    """Seconds `inv TASK -i INVENTORY ARGS --yes` took; exit status other than 0 stops the bench."""
    cmd = [str(REPO / ".venv/bin/inv"), args[0], "-i", str(inventory_path), *args[1:], "--yes"]
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - t0
    if res.returncode != 0:
        sys.exit(f"{' '.join(args[:3])}... exit {res.returncode}: {res.stderr[-2000:]}")
    return seconds


def clean(inventory_path: Path, names: list[str]) -> None:
    hosts = [a for n in names for a in ("--host", n)]
    inv(inventory_path, "exec", *hosts, "--cmd", CLEAN)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-upgrade-"))
    os.environ["FLEET_WHEELHOUSE"] = str(folder / "wheelhouse")
    os.environ["FLEET_STATE_DIR"] = str(folder / "state")
    os.environ["FLEET_SANDBOX_ONLY"] = "1"
    simwheels.build(folder / "wheelhouse")
    path = config().inventory_path
    names = sorted(inventory.load(path).hosts)
    one = ["--host", names[0]]
    plain, old, new = (playbook(folder, "bench-plain", None), playbook(folder, "bench-old", OLD),
                       playbook(folder, "bench-new", NEW))
    rows: dict[str, list[float]] = {"redeploy": [], "upgrade": [], "rollback": [], "fleet_redeploy": [],
                                    "fleet_upgrade": []}
    everyone = [a for n in names for a in ("--host", n)]
    for _ in range(args.repeat):
        clean(path, names)
        inv(path, "deploy", *one, "--playbook", str(plain))
        rows["redeploy"].append(inv(path, "deploy", *one, "--playbook", str(plain), "--force"))
        inv(path, "deploy", *one, "--playbook", str(old))
        rows["upgrade"].append(inv(path, "deploy", *one, "--playbook", str(new)))
        rows["rollback"].append(inv(path, "rollback", *one, "--playbook", str(old)))
        if len(names) > 1:
            clean(path, names)
            inv(path, "deploy", *everyone, "--playbook", str(plain), "--serial", "25%")
            rows["fleet_redeploy"].append(inv(path, "deploy", *everyone, "--playbook", str(plain), "--force",
                                              "--serial", "1,25%"))
            inv(path, "deploy", *everyone, "--playbook", str(old), "--serial", "25%")
            rows["fleet_upgrade"].append(inv(path, "deploy", *everyone, "--playbook", str(new), "--serial", "1,25%"))
    clean(path, names)
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    print(f"{'what':>15} {'median s':>9} {'ratio':>7}   ({args.repeat} runs; one host {names[0]}; fleet of "
          f"{len(names)} hosts)")
    for kind, base in (("redeploy", "redeploy"), ("upgrade", "redeploy"), ("rollback", "redeploy"),
                       ("fleet_redeploy", "fleet_redeploy"), ("fleet_upgrade", "fleet_redeploy")):
        if kind in med:
            print(f"{kind:>15} {med[kind]:>9.1f} {med[kind] / med[base]:>6.2f}x")
    print(json.dumps({"runs": args.repeat, "hosts": len(names), **{f"{k}_s": round(v, 1) for k, v in med.items()}}))


if __name__ == "__main__":
    main()
