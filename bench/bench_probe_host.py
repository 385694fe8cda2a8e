"""The probe script on this machine, without SSH (a GPU host that has no sshd: the lent device): its total
time with its commands at once (as shipped) and one after the other (its fallback when the host has no
mktemp), each of the four nvidia-smi calls alone, and the four at once on their own (the floor); wall time
and the CPU the command and its children used. With --old FILE, the same for another version of the script
(e.g. `git show REV:fleet/host/programs/probe.sh > FILE`), in the same run.

usage: python3 bench/bench_probe_host.py [--runs 10] [--venv DIR] [--old FILE]   (a table, then one JSON line)
Goal (issue "Speed against the peers"): the script's total at most 1.3x the four calls at once.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.host import programs as hostside  # noqa: E402


def _constants(path: Path, *names: str) -> list:
    """Literal constants of a module read without importing it: a GPU host need not have fleet's
    dependencies (the lent machine has no pydantic)."""
    found = {t.id: ast.literal_eval(n.value) for n in ast.parse(path.read_text()).body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(t, ast.Name) and t.id in names}
    return [found[n] for n in names]


QUERY_FIELDS, DONE = _constants(REPO / "fleet/host/probe.py", "QUERY_FIELDS", "DONE")

CALLS = {
    "query-gpu": ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,nounits"],
    "topo -m": ["nvidia-smi", "topo", "-m"],
    "topo -p2p r": ["nvidia-smi", "topo", "-p2p", "r"],
    "--version": ["nvidia-smi", "--version"],
}
# The line that picks concurrent or one-after-the-other (whatever the temp dir's variable is called).
CHOICE = re.compile(r"^if \w+=\$\(mktemp -d 2>/dev/null\); then$", re.M)


def sequential(text: str) -> str:
    assert len(CHOICE.findall(text)) == 1, "the script no longer chooses on mktemp"
    return CHOICE.sub("if false; then", text)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(fn) -> tuple[float, float]:
    cpu, start = children_cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - start, children_cpu() - cpu


def median_ms(fn, runs: int) -> tuple[float, float]:
    """Median wall ms and median CPU ms (the command and its children) over runs."""
    samples = [timed(fn) for _ in range(runs)]
    return (round(statistics.median(s[0] for s in samples) * 1000, 1),
            round(statistics.median(s[1] for s in samples) * 1000, 1))


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
    ap.add_argument("--old", type=Path, help="another version of probe.sh, measured beside the shipped one")
    args = ap.parse_args()
    scripts = {"": hostside.text("probe.sh")}
    if args.old:
        scripts["old "] = args.old.read_text()
    for text in scripts.values():
        script_run(text, args.venv)  # warm the page cache once
    rows = {name: median_ms(lambda c=cmd: subprocess.run(c, capture_output=True), args.runs)
            for name, cmd in CALLS.items()}
    rows["the four in series (sum)"] = (round(sum(rows[n][0] for n in CALLS), 1),
                                        round(sum(rows[n][1] for n in CALLS), 1))
    rows["the four at once"] = median_ms(at_once, args.runs)
    for label, text in scripts.items():
        rows[f"{label}probe script, one by one"] = median_ms(lambda t=text: script_run(sequential(t), args.venv),
                                                            args.runs)
        rows[f"{label}probe script, at once"] = median_ms(lambda t=text: script_run(t, args.venv), args.runs)
    floor = rows["the four at once"][0]
    ratios = {label or "shipped": round(rows[f"{label}probe script, at once"][0] / floor, 2) for label in scripts}
    print(f"{'':<38} median of {args.runs}: wall ms, CPU ms")
    for name, (ms, cpu) in rows.items():
        print(f"{name:<38} {ms:>8.1f} {cpu:>8.1f}")
    for label, ratio in ratios.items():
        print(f"{label.strip() + ' script (at once) / four at once':<38} {ratio:>8.2f}  (goal <= 1.3)")
    print(json.dumps({"runs": args.runs, "ms": rows, "ratio_to_floor": ratios}))


if __name__ == "__main__":
    main()
