"""The probe script on this machine, without SSH (a GPU host that has no sshd: the lent device): its total
time with the nvidia-smi calls at once (as shipped) and one after the other (its fallback when the host has
no mktemp), each of the four nvidia-smi calls alone, and the four at once on their own (the floor).

usage: python3 bench/bench_probe_host.py [--runs 10] [--venv DIR]   (prints a table, then one JSON line)
Goal (issue "Speed against the peers"): the script's total at most 1.3x the four calls at once.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet import hostside  # noqa: E402


def _constants(path: Path, *names: str) -> list:
    """Literal constants of a module read without importing it: a GPU host need not have fleet's
    dependencies (the lent machine has no pydantic)."""
    found = {t.id: ast.literal_eval(n.value) for n in ast.parse(path.read_text()).body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name) and t.id in names}
    return [found[n] for n in names]


QUERY_FIELDS, DONE = _constants(REPO / "fleet/probe.py", "QUERY_FIELDS", "DONE")

CALLS = {
    "query-gpu": ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,nounits"],
    "topo -m": ["nvidia-smi", "topo", "-m"],
    "topo -p2p r": ["nvidia-smi", "topo", "-p2p", "r"],
    "--version": ["nvidia-smi", "--version"],
}
SEQUENTIAL = ("if fleet_out=$(mktemp -d 2>/dev/null); then", "if false; then")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_ms(fn, runs: int) -> float:
    return round(statistics.median(timed(fn) for _ in range(runs)) * 1000, 1)


def script_run(text: str, venv: str) -> None:
    done = subprocess.run(["sh", "-c", text, "fleet-probe", venv, "sglang", ",".join(QUERY_FIELDS)],
                          capture_output=True, text=True, timeout=120)
    if not done.stdout.endswith(DONE + "\n"):
        raise SystemExit(f"probe script did not finish: {done.stderr[-300:]}")


def at_once() -> None:
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in CALLS.values()]
    for p in procs:
        p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--venv", default=sys.prefix)
    args = ap.parse_args()
    shipped = hostside.text("probe.sh")
    assert SEQUENTIAL[0] in shipped
    sequential = shipped.replace(*SEQUENTIAL)
    script_run(shipped, args.venv)  # warm the page cache once
    rows = {name: median_ms(lambda c=cmd: subprocess.run(c, capture_output=True), args.runs)
            for name, cmd in CALLS.items()}
    rows["the four in series (sum)"] = round(sum(rows[n] for n in CALLS), 1)
    rows["the four at once"] = median_ms(at_once, args.runs)
    rows["probe script, calls one by one"] = median_ms(lambda: script_run(sequential, args.venv), args.runs)
    rows["probe script, calls at once"] = median_ms(lambda: script_run(shipped, args.venv), args.runs)
    ratio = round(rows["probe script, calls at once"] / rows["the four at once"], 2)
    print(f"{'':<34} median ms of {args.runs}")
    for name, ms in rows.items():
        print(f"{name:<34} {ms:>8.1f}")
    print(f"{'script (at once) / four at once':<34} {ratio:>8.2f}  (goal <= 1.3)")
    print(json.dumps({"runs": args.runs, "ms": rows, "ratio_to_floor": ratio}))


if __name__ == "__main__":
    main()
