"""A `packages:` venv built on one sandbox host (fleet.host.venvs.ensure, the simulated stack as wheels from
sandbox/sim/wheels.py): time and bytes sent from a cold wheelhouse (the host has no wheel), a warm one (it has
them all: nothing sent, the venv built again), and a venv already there (what a rollback or a redeploy of the
same pins costs); disk per venv; pip or uv (whichever the host has: the sandbox image has no uv, so only pip).
The baseline is the warm build of the same run: cold and reuse are given as ratios of it.

usage: FLEET_SANDBOX_INSTANCE=dev4 python3 bench/bench_venv_build.py [--repeat 3]   (a table, then one JSON line)
The sandbox host must be up (`inv sandbox.up`); this leaves it as found, less the venvs and wheels it made.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet import inventory  # noqa: E402
from fleet.host import venvs  # noqa: E402
from fleet.host.service import sh  # noqa: E402
from fleet.ssh.connect import ConnectOptions, open_connection  # noqa: E402
from sandbox.config import config  # noqa: E402
from sandbox.sim import wheels as simwheels  # noqa: E402

PINS = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}
CLEAN = f"rm -rf {venvs.VENVS} {venvs.WHEELS}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--host", default="sbx0")
    args = ap.parse_args()
    house = Path(tempfile.mkdtemp(prefix="bench-wheelhouse-"))
    os.environ["FLEET_WHEELHOUSE"] = str(house)
    simwheels.build(house)
    host = inventory.load(config().inventory_path).hosts[args.host]
    conn = open_connection(host, ConnectOptions())
    rows: dict[str, list[float]] = {"cold": [], "warm": [], "reuse": []}
    sent: dict[str, int] = {}
    try:
        tool = "uv" if sh(conn, host, "command -v uv || true").strip() else "pip"
        for _ in range(args.repeat):
            sh(conn, host, CLEAN)
            for kind in ("cold", "warm", "reuse"):
                if kind == "warm":
                    sh(conn, host, f"rm -rf {venvs.VENVS}")
                t0 = time.monotonic()
                venv = venvs.ensure(conn, host, PINS, lambda m: None)
                rows[kind].append(time.monotonic() - t0)
                sent[kind] = venv.bytes_sent
        disk = int(sh(conn, host, f"du -sb {venvs.VENVS}/.build/ | cut -f1").strip())
        wheels = int(sh(conn, host, f"du -sb {venvs.WHEELS} | cut -f1").strip())
        sh(conn, host, CLEAN)
    finally:
        conn.close()
    warm = statistics.median(rows["warm"])
    print(f"{'build':>6} {'median s':>9} {'x warm':>7} {'bytes sent':>11}   "
          f"({tool} on {args.host}, {args.repeat} runs)")
    for kind, times in rows.items():
        med = statistics.median(times)
        print(f"{kind:>6} {med:>9.2f} {med / warm:>6.2f}x {sent[kind]:>11}")
    print(f"disk per venv {disk / 1e6:.1f} MB; wheels on the host {wheels / 1e6:.2f} MB")
    print(json.dumps({"tool": tool, "runs": args.repeat, **{f"{k}_s": round(statistics.median(v), 2)
                                                           for k, v in rows.items()},
                      "cold_bytes": sent["cold"], "warm_bytes": sent["warm"], "venv_bytes": disk,
                      "wheels_bytes": wheels}))


if __name__ == "__main__":
    main()
