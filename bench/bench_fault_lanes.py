"""What spreading a flow's fault points over several sandbox hosts (lanes) saves the fault-point harness: the same
points and kinds (default: the deploy flow's every 4th point, kinds fail and kill) run by
tests/faults/test_fault_points.py with FLEET_FAULT_LANES=1 (the baseline: one host, one run after the other) and
with FLEET_FAULT_LANES=3, in the same run; the figure is the ratio of the two tests' call times (the sandbox's
and the lanes' set-up excluded, the traced runs included), with the machine's load beside it. Both runs must
pass: a speed-up that breaks the invariant is no speed-up.

usage (root): .venv/bin/python bench/bench_fault_lanes.py [--points 1-59/4] [--kinds fail,kill] [--flow deploy]
(a line, then one JSON line). It uses the sandbox instance FLEET_SANDBOX_INSTANCE names ("bench" by default), so it
never replaces another fleet; it reaches no address outside the sandbox.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def points(spec: str) -> str:
    """`1-59/4` -> `1,5,9,...,57` (FLEET_FAULT_POINTS's list); anything else as it is."""
    if "/" not in spec:
        return spec
    span, step = spec.split("/")
    low, high = span.split("-")
    return ",".join(str(n) for n in range(int(low), int(high) + 1, int(step)))


def run(lanes: int, args: argparse.Namespace, out: Path) -> tuple[float, int, float]:
    """The tests' call seconds, the runs made, the mean load over the call, for `lanes` lanes."""
    junit = out / f"lanes-{lanes}.xml"
    log = out / f"lanes-{lanes}.log"
    env = {**os.environ, "FLEET_FAULT_LANES": str(lanes), "FLEET_FAULT_POINTS": points(args.points),
           "FLEET_FAULT_LOG": str(log), "FLEET_SANDBOX_INSTANCE": os.environ.get("FLEET_SANDBOX_INSTANCE", "bench")}
    chosen = " or ".join(f"{args.flow}-{kind}" for kind in args.kinds.split(","))
    load0 = os.getloadavg()[0]
    done = subprocess.run([str(REPO / ".venv/bin/pytest"), "-p", "no:cacheprovider", "-q",
                           "tests/faults/test_fault_points.py", "-k", f"test_every and ({chosen})",
                           f"--junitxml={junit}", "-o", "junit_duration_report=call"],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {lanes}-lane run failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    calls = [float(case.get("time", "0")) for case in ET.parse(junit).iter("testcase")]
    return sum(calls), len(log.read_text().splitlines()), (load0 + os.getloadavg()[0]) / 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flow", default="deploy", choices=["deploy", "rollback", "patch"])
    ap.add_argument("--points", default="1-59/4")
    ap.add_argument("--kinds", default="fail,kill")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the sandbox needs root")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        one, runs_one, load_one = run(1, args, Path(tmp))
        three, runs_three, load_three = run(3, args, Path(tmp))
        wall = time.monotonic() - start
    assert runs_one == runs_three, (runs_one, runs_three)
    print(f"{args.flow} {args.kinds} at points {args.points}: {runs_one} runs; one lane {one:.0f} s "
          f"({one / runs_one:.1f} s a run, load {load_one:.1f}), three lanes {three:.0f} s "
          f"({three / runs_three:.1f} s a run, load {load_three:.1f}): {one / three:.2f}x ({wall:.0f} s in all)")
    print(json.dumps({"flow": args.flow, "kinds": args.kinds, "points": args.points, "runs": runs_one,
                      "one_lane_s": round(one, 1), "three_lanes_s": round(three, 1), "ratio": round(one / three, 2),
                      "load": [round(load_one, 1), round(load_three, 1)]}))


if __name__ == "__main__":
    main()
