"""Delay from a fatal line appearing in a sandbox host's journal to fleet reporting it (goal: under 1 s).

A transient unit on the host prints normal startup lines, then a fatal one carrying the host's clock
(the sandbox shares this machine's clock); fleet follows the unit's journal exactly as deploy does
(fleet.logs.journal: its Follower and the LogWatcher deploy's watch uses) and notes when it classifies the line.

usage (root, a demo sandbox up): .venv/bin/python bench/bench_journal_delay.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import time

os.environ["FLEET_SANDBOX_ONLY"] = "1"

from fleet import inventory  # noqa: E402
from fleet.logs import journal  # noqa: E402
from fleet.logs.watch import FatalLogLine, LogWatcher  # noqa: E402
from fleet.ssh.connect import open_connection  # noqa: E402
from fleet.ssh.remote import run  # noqa: E402
from sandbox.config import config  # noqa: E402

SCRIPT = ("for i in 1 2 3 4 5; do echo \"Load weight begin. avail mem=90.1 GB\"; sleep 0.05; done; "
          "echo \"t=$(date +%s.%N) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\"; sleep 30")


def one_run(conn, host, n: int) -> float:
    unit = f"fleet-bench-{n}"
    follower = journal.Follower(conn, host, journal.command(unit, journal.cursor(conn, host)))
    watcher = LogWatcher()
    # Through a file: systemd would expand $(...) and $VAR in a command line itself.
    run(conn, host, f"printf '%s\\n' {shlex.quote(SCRIPT)} > /tmp/{unit}.sh && "
                    f"systemd-run --quiet --unit={unit} sh /tmp/{unit}.sh")
    try:
        deadline = time.time() + 30
        try:
            journal.follow(follower, watcher, lambda: ("HANG", "") if time.time() > deadline else None)
        except FatalLogLine as exc:
            seen = time.time()
            return seen - float(exc.event.text.split("t=", 1)[1].split()[0])
        raise RuntimeError("fatal line never reported")
    finally:
        follower.close()
        run(conn, host, f"systemctl stop {unit} 2>/dev/null; systemctl reset-failed {unit} 2>/dev/null; true")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    cfg = config("demo")
    host = inventory.load(cfg.inventory_path).hosts["sbx0"]
    conn = open_connection(host)
    try:
        delays = [one_run(conn, host, n) for n in range(args.runs)]
    finally:
        conn.close()
    print(f"fatal line -> fleet reports it: median {statistics.median(delays) * 1000:.0f} ms, "
          f"max {max(delays) * 1000:.0f} ms over {len(delays)} runs (goal < 1000 ms)")


if __name__ == "__main__":
    main()
