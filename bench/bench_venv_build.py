"""A `packages:` venv built on one sandbox host (fleet.host.venvs.ensure, the simulated stack as wheels from
sandbox/sim/wheels.py), by pip and by uv (when there is a uv wheel) in the same run on the same host: time and bytes
sent from a cold wheelhouse (the host has no wheel), a warm one (it has them all: nothing sent, the venv built
again), and a venv already there (what a rollback or a redeploy of the same pins costs); disk per venv.
The baseline is pip's build of the same kind in the same run: uv's figures are given as ratios of it (and each
tool's cold and reuse as ratios of its warm build). The sandbox image has no uv: the binary of the uv wheel
bootstrap.sh downloaded (or `--uv-wheel` names) is put at the host's
/usr/local/bin/uv for the run (moved aside while pip builds) and removes it after. Nothing here reaches an index.

usage: FLEET_SANDBOX_INSTANCE=dev4 python3 bench/bench_venv_build.py [--repeat 3] [--uv-wheel uv-...whl]
The sandbox host must be up (`inv sandbox.up`); this leaves it as found, less the venvs and wheels it made.

Figures on dev3's sbx0 (2 shared cores, load 0.4-0.8; uv 0.13.9, Debian 12's pip 23.0.1; 3 runs, medians;
the simulated wheels are 97 kB, so this is each tool's own cost, not unpacking torch): pip cold 5.12 s, warm
5.16 s, reuse 0.12 s, 23.2 MB per venv (pip itself is most of it); uv cold 0.89 s (0.17x pip), warm 0.68 s
(0.13x), reuse 0.07 s (0.60x: both are one `test` over SSH), 0.8 MB per venv (0.04x: no pip in it). 42 s.
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
from sandbox import uv as sandbox_uv  # noqa: E402
from sandbox.config import config  # noqa: E402
from sandbox.sim import wheels as simwheels  # noqa: E402

PINS = {"sglang": "0.5.9", "flashinfer-python": "0.6.3", "torch": "2.9.1"}
CLEAN = f"rm -rf {venvs.VENVS} {venvs.WHEELS}"
KINDS = ("cold", "warm", "reuse")
ASIDE = f"{sandbox_uv.ON_HOST}.bench-aside"


def measure(conn, host, tool: str, rows: dict, sent: dict, disk: dict) -> None:
    """One cold, warm and reuse build by `tool` (the one the host then has: venvs.ensure chooses, not this)."""
    sh(conn, host, CLEAN)
    for kind in KINDS:
        if kind == "warm":
            sh(conn, host, f"rm -rf {venvs.VENVS}")
        t0 = time.monotonic()
        venv = venvs.ensure(conn, host, PINS, lambda m: None)
        rows[tool][kind].append(time.monotonic() - t0)
        sent[tool][kind] = venv.bytes_sent
        if kind != "reuse" and venv.built != tool:
            raise SystemExit(f"{host.name}: the venv was built by {venv.built}, not {tool}")
    disk[tool] = int(sh(conn, host, f"du -sb {venvs.VENVS}/.build/ | cut -f1").strip())
    sh(conn, host, CLEAN)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--host", default="sbx0")
    ap.add_argument("--uv-wheel", type=Path, default=sandbox_uv.wheel(),
                    help="a uv wheel whose binary is put on the host to measure uv too (default: bootstrap's)")
    args = ap.parse_args()
    if args.uv_wheel and not args.uv_wheel.is_file():
        ap.error(f"--uv-wheel: no such file: {args.uv_wheel}")
    house = Path(tempfile.mkdtemp(prefix="bench-wheelhouse-"))
    os.environ["FLEET_WHEELHOUSE"] = str(house)
    simwheels.build(house)
    host = inventory.load(config().inventory_path).hosts[args.host]
    conn = open_connection(host, ConnectOptions())
    tools = ["pip", "uv"] if args.uv_wheel else ["pip"]
    rows: dict[str, dict[str, list[float]]] = {t: {k: [] for k in KINDS} for t in tools}
    sent: dict[str, dict[str, int]] = {t: {} for t in tools}
    disk: dict[str, int] = {}
    uv_version = None
    try:
        if sh(conn, host, "command -v uv || true").strip():
            raise SystemExit(f"{args.host} has a uv of its own: this bench puts one there and measures pip without")
        if args.uv_wheel:
            uv_version = sandbox_uv.install(conn, host, args.uv_wheel)
        for _ in range(args.repeat):  # interleaved, so a change of the machine's load falls on both
            for tool in tools:
                if args.uv_wheel:
                    on, off = (ASIDE, sandbox_uv.ON_HOST) if tool == "uv" else (sandbox_uv.ON_HOST, ASIDE)
                    sh(conn, host, f"if [ -e {on} ]; then mv -f {on} {off}; fi")
                measure(conn, host, tool, rows, sent, disk)
    finally:
        if args.uv_wheel:
            sh(conn, host, f"rm -f {ASIDE}", check=False)
            sandbox_uv.remove(conn, host)
        sh(conn, host, CLEAN, check=False)
        conn.close()
    med = {t: {k: statistics.median(v) for k, v in rows[t].items()} for t in tools}
    print(f"{'tool':>4} {'build':>6} {'median s':>9} {'x warm':>7} {'x pip':>6} {'bytes sent':>11}   "
          f"(on {args.host}, {args.repeat} runs{', ' + uv_version if uv_version else ''})")
    for tool in tools:
        for kind in KINDS:
            m = med[tool][kind]
            print(f"{tool:>4} {kind:>6} {m:>9.2f} {m / med[tool]['warm']:>6.2f}x "
                  f"{m / med['pip'][kind]:>5.2f}x {sent[tool][kind]:>11}")
    for tool in tools:
        print(f"{tool}: disk per venv {disk[tool] / 1e6:.1f} MB ({disk[tool] / disk['pip']:.2f}x pip)")
    print(json.dumps({"runs": args.repeat, "uv_version": uv_version, **{
        tool: {**{f"{k}_s": round(med[tool][k], 2) for k in KINDS},
               **({f"{k}_x_pip": round(med[tool][k] / med["pip"][k], 2) for k in KINDS} if tool != "pip" else {}),
               "cold_bytes": sent[tool]["cold"], "warm_bytes": sent[tool]["warm"], "venv_bytes": disk[tool]}
        for tool in tools}}))


if __name__ == "__main__":
    main()
