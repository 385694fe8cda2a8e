"""Hostile hosts (a benchmark, not a test): the controller's peak RSS for `inv probe` of N hosts while one
floods, against the same probe of N healthy hosts in the same run; the time `remote.run` takes to give up on
each hostile case against its deadline.

The hosts are in-process SSH servers on loopback ports (tests/hostile/hostkit.py): 64 sandbox hosts are too
heavy for a shared machine, and the client side (fleet, unchanged) is what is measured. The healthy hosts
answer the probe with a real profile's output (sandbox/profiles/rtx-pro-6000-x8-proxmox).

usage: .venv/bin/python bench/bench_hostile.py [--hosts 64] [--deadline 2] [--repo PATH]
  --repo: run `inv` from another checkout (e.g. the fork point's, for a before/after of the healthy probe)
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

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "hostile"), str(REPO / "tests" / "unit" / "host")]
os.environ["FLEET_SANDBOX_ONLY"] = "1"

from hostkit import (  # noqa: E402
    HANG_EXEC,
    HostileFleet,
    answer,
    dribble,
    drop,
    eof_no_status,
    flood,
    garbage,
    no_eof,
    one_line,
    timed,
)
from test_probe_profiles import PROFILES, assemble  # noqa: E402

from fleet.ssh import remote  # noqa: E402
from fleet.ssh.connect import ConnectOptions, open_connection  # noqa: E402


def inv_probe(fleet: HostileFleet, repo: Path) -> tuple[float, float, int, int]:
    """(wall seconds, peak RSS MiB, hosts ok, exit code) of `inv probe --json` over every host."""
    cmd = [str(REPO / ".venv/bin/inv"), "probe", "-i", str(fleet.inventory), "--json"]
    cmd += [a for name in fleet.servers for a in ("--host", name)]
    env = {**os.environ, "FLEET_STATE_DIR": tempfile.mkdtemp(prefix="bench-hostile-"), "PYTHONPATH": str(repo)}
    out = fleet.folder / "probe.json"
    start = time.monotonic()
    with open(out, "w") as o:
        proc = subprocess.Popen(cmd, cwd=repo, stdout=o, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - start
    hosts = json.loads(out.read_text() or '{"hosts": []}').get("hosts", [])
    return seconds, usage.ru_maxrss / 1024, sum(1 for h in hosts if h.get("ok")), proc.returncode


def rss_figures(n: int, repo: Path) -> None:
    healthy = answer(assemble(PROFILES / "rtx-pro-6000-x8-proxmox").encode())
    with tempfile.TemporaryDirectory() as d:
        with HostileFleet(Path(d), {f"h{i}": healthy for i in range(n)}) as fleet:
            base = inv_probe(fleet, repo)
    with tempfile.TemporaryDirectory() as d:
        hosts = {f"h{i}": healthy for i in range(n - 1)} | {"flood": flood(b"GPU " * 255 + b"\n")}
        with HostileFleet(Path(d), hosts) as fleet:
            hostile = inv_probe(fleet, repo)
    print(f"inv probe of {n} hosts ({repo}):")
    print(f"  all healthy        {base[0]:6.1f} s  peak RSS {base[1]:6.0f} MiB  {base[2]}/{n} ok  exit {base[3]}")
    print(f"  one flooding       {hostile[0]:6.1f} s  peak RSS {hostile[1]:6.0f} MiB  {hostile[2]}/{n} ok  "
          f"exit {hostile[3]}  (RSS x{hostile[1] / base[1]:.2f} of the healthy run)")


def give_up_figures(deadline: float) -> None:
    cases = {"EOF, no exit status": eof_no_status(), "no EOF ever": no_eof(), "dribble (1 byte/50 ms)": dribble(),
             "exec never answered": HANG_EXEC, "endless output": flood(), "one endless line": one_line(),
             "binary garbage": garbage(), "dropped link": drop(b"half")}
    print(f"remote.run against each hostile case, deadline {deadline:g}s, cap {remote.MAX_OUTPUT >> 20} MiB:")
    for name, behaviour in cases.items():
        with tempfile.TemporaryDirectory() as d, HostileFleet(Path(d), {"h": behaviour}) as fleet:
            host = fleet.hosts()[0]
            conn = open_connection(host, ConnectOptions())
            try:
                seconds, result = timed(lambda c=conn, h=host: remote.run(c, h, "x", timeout=deadline))
            finally:
                conn.close()
        what = type(result).__name__ if isinstance(result, Exception) else f"exit {result.exited}"
        print(f"  {name:<24} {seconds:5.2f} s  ({seconds / deadline:4.2f} of the deadline)  {what}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--deadline", type=float, default=2.0)
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--skip-give-up", action="store_true")
    args = ap.parse_args()
    if not args.skip_give_up:
        give_up_figures(args.deadline)
    rss_figures(args.hosts, args.repo.resolve())


if __name__ == "__main__":
    main()
