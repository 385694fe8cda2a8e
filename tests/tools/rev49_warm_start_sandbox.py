"""rev49: issue 49's warm start against a hostile host, end to end on a sandbox instance (not collected by pytest).

    FLEET_SANDBOX_INSTANCE=lane6 FLEET_STATE_DIR=/tmp/state-lane6 .venv/bin/inv sandbox.up --hosts 2 \
        --profile rtx-pro-6000-x8-proxmox
    FLEET_SANDBOX_INSTANCE=lane6 FLEET_STATE_DIR=/tmp/state-lane6 PYTHONPATH=. .venv/bin/python \
        tests/tools/rev49_warm_start_sandbox.py bomb|partial

sbx0 and sbx1 are hosts of one kind (one cache key). sbx0 is compromised: a .pth file in its venv answers
fleet's `kcache.py collect` with a tar of its choosing (fleet runs the program with the venv's python). sbx0 is
deployed (it serves and gives its "caches"), then sbx1 (it gets them placed). `bomb`: one sparse member of a 3 KiB
tar (rev49 #1). `partial`: a plain file in ~/.cache/deep_gemm, then a file named as the flashinfer cache folder
(rev49 #2). Prints what fleet said and what sbx1 holds."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "integration"), str(REPO / "tests" / "unit"), str(REPO)]

from fleetcli import inv_at, llama_playbook, sh  # noqa: E402

from fleet import inventory as fleet_inventory  # noqa: E402
from sandbox.config import config  # noqa: E402
from tests.unit.deploy.test_warm_start_review import _sparse_tar, _tar  # noqa: E402

OPS = "/root/.cache/flashinfer/0.6.3/120a/cached_ops"
HOSTILE = ("import os, sys; sys.argv[:2] == ['-c', 'collect'] and (sys.stdout.buffer.write(open('/root/.evil.tar', "
           "'rb').read()), sys.stdout.flush(), os._exit(0))\n")  # a .pth line: Debian's own sitecustomize shadows one

def main(what: str) -> None:
    work = Path("/tmp/rev49-sbx")
    work.mkdir(exist_ok=True)
    doc = yaml.safe_load(config().inventory_path.read_text())
    doc["hosts"] = {n: doc["hosts"][n] for n in ("sbx0", "sbx1")}
    for name in doc["hosts"]:
        doc["hosts"][name].setdefault("vars", {}).setdefault("env", {})["SGLANG_SIM_TIME_SCALE"] = "0.05"
    path = work / "inventory" / "hosts.yaml"  # an inventory's folder holds only inventory files
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    inv = fleet_inventory.load(path)
    book = llama_playbook(work, [{"name": "plain", "env": {"NCCL_P2P_DISABLE": "1"}}], name="llama-rev49",
                          serve={"warm_start": True})
    if what == "bomb":
        evil = _sparse_tar(OPS.lstrip("/") + "/batch_prefill/evil.so", 256 << 20)
    else:
        evil = _tar({"root/.cache/deep_gemm/from-sbx0": b"x", OPS.lstrip("/"): b"a file named as the folder"})
    site = sh(inv, "sbx0", "ls -d /root/ml-env/lib/python3*/site-packages").strip()
    sh(inv, "sbx0", f"echo {base64.b64encode(evil).decode()} | base64 -d > /root/.evil.tar && echo "
                    f"{base64.b64encode(HOSTILE.encode()).decode()} | base64 -d > {site}/zz-rev49.pth")
    sh(inv, "sbx1", f"mkdir -p /root/.cache/deep_gemm && echo mine > /root/.cache/deep_gemm/sbx1-own; rm -rf {OPS}")
    state = Path(os.environ["FLEET_STATE_DIR"])
    for host in ("sbx0", "sbx1"):
        start = time.monotonic()
        proc = inv_at(path, "deploy", "--host", host, "--playbook", str(book), "--force", "--json")
        said = [line for line in proc.stderr.splitlines() if "start" in line or "cache" in line]
        status = json.loads(proc.stdout).get("status") if proc.stdout.startswith("{") else proc.stdout[-300:]
        print(f"== deploy {host}: exit {proc.returncode}, status {status}, {time.monotonic() - start:.0f}s")
        print("\n".join(said[-8:]) if proc.returncode != 2 else proc.stderr[-600:])
    print("== store:", [(p.name[:12], (p / "cache.tar").stat().st_size) for p in (state / "kcache").iterdir()
                        if (p / "cache.tar").exists()])
    print("== sbx1:", sh(inv, "sbx1", f"du -sh {OPS} 2>&1; ls -la /root/.cache/deep_gemm; "
                                      "ls -d /root/.cache/flashinfer/0.6.3/120a/*; systemctl is-active sglang"))
    sh(inv, "sbx0", f"rm -f /root/.evil.tar {site}/zz-rev49.pth")


if __name__ == "__main__":
    main(sys.argv[1])
