"""What the fault-point harness saves per `inv` run by forking from tests/faults/forkinv.py (fleet imported once)
instead of starting `.venv/bin/inv` afresh: the same command both ways (one that loads tasks.py, the inventory
and fails on an unknown host, exit 2, touching no host), N runs each, in the same run; the ratio is the figure.

usage: .venv/bin/python bench/bench_fault_harness_start.py [--runs 5]   (a line, then one JSON line)
Reads no network, touches no host.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARGV = ["history", "-i", "inventory/hosts.example.yaml", "--host", "no-such-host"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    env = {**os.environ, "FLEET_SANDBOX_ONLY": "1"}
    start = time.monotonic()
    for _ in range(runs):
        done = subprocess.run([str(REPO / ".venv/bin/inv"), *ARGV], cwd=REPO, capture_output=True, env=env,
                              stdin=subprocess.DEVNULL, check=False)
        assert done.returncode == 2, done.stderr[-500:]
    fresh = (time.monotonic() - start) / runs
    server = subprocess.Popen([str(REPO / ".venv/bin/python"), str(REPO / "tests/faults/forkinv.py")], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdin is not None and server.stdout is not None
    with tempfile.TemporaryDirectory() as tmp:
        def forked() -> int:
            request = {"argv": ["inv", *ARGV], "env": env, "out": f"{tmp}/out", "err": f"{tmp}/err"}
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            while not (line := server.stdout.readline()).startswith("forkinv: "):
                assert line, "the fork server died"
            return int(json.loads(line.removeprefix("forkinv: "))["rc"])

        start = time.monotonic()
        assert forked() == 2
        warm_up = time.monotonic() - start
        start = time.monotonic()
        for _ in range(runs):
            assert forked() == 2
        fork = (time.monotonic() - start) / runs
    server.stdin.close()
    server.wait(timeout=30)
    server.stdout.close()
    print(f"inv started afresh {fresh:.2f} s a run, forked {fork:.2f} s a run ({fresh / fork:.1f}x; the server's "
          f"own start-up {warm_up:.1f} s, once)")
    print(json.dumps({"runs": runs, "fresh_s": round(fresh, 3), "forked_s": round(fork, 3),
                      "ratio": round(fresh / fork, 1), "server_start_s": round(warm_up, 2)}))


if __name__ == "__main__":
    main()
