"""What the command line costs before it does anything: `python -X importtime` of `inv --list`, of
`inv probe --json` up to its first host (the task's imports, then a refusal by the sandbox guard, so no
host is contacted), of everything the probe imports before it connects (the refusal comes before the connect
options are made) and of the same probe drawing its table (its view imported too), for this tree and, with
--old REV, for a git revision of it in the same run. Medians of --runs fresh processes.

usage: .venv/bin/python bench/bench_cli_imports.py [--runs 7] [--old REV]   (a table, then one JSON line)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = "import sys; from invoke.main import program; sys.argv = ['inv', *sys.argv[1:]]; program.run()"
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")
# TEST-NET-1 (RFC 5737): FLEET_SANDBOX_ONLY=1 refuses it before any connection is tried.
INVENTORY = "hosts:\n  probe-target:\n    address: 192.0.2.1\n    user: root\n"


def scenarios(inventory: Path) -> dict[str, list[str]]:
    return {
        "inv --list": ["--list"],
        "inv probe --json (to the first host)": ["probe", "-i", str(inventory), "--json"],
        # what the guard's refusal above stops short of: the connect options (become passwords) and the probe
        "inv probe --json (all its imports)": ["-c", "import tasks, fleet.cli.probe; from fleet import cli; "
                                                     "cli.options([])"],
        "inv probe (table view) imports": ["-c", "import tasks, fleet.cli.probe, fleet.cli.probe_view"],
    }


def measure(tree: Path, args: list[str]) -> dict[str, float | int | bool]:
    """One fresh process: wall ms, ms spent importing (sum of self times), modules, rich loaded."""
    code = [sys.executable, "-X", "importtime"] + (args if args[0] == "-c" else ["-c", RUN, *args])
    env = {**os.environ, "FLEET_SANDBOX_ONLY": "1", "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    done = subprocess.run(code, cwd=tree, capture_output=True, text=True, env=env, timeout=120)
    wall = (time.perf_counter() - start) * 1000
    rows = [m.groups() for m in map(LINE.match, done.stderr.splitlines()) if m]
    return {"wall_ms": wall, "import_ms": sum(int(r[0]) for r in rows) / 1000, "modules": len(rows),
            "rich": any(r[3] == "rich" or r[3].startswith("rich.") for r in rows),
            "rich_ms": sum(int(r[0]) for r in rows if r[3] == "rich" or r[3].startswith("rich.")) / 1000}


def median_of(tree: Path, args: list[str], runs: int) -> dict[str, float | int | bool]:
    samples = [measure(tree, args) for _ in range(runs)]
    return {k: (statistics.median(float(s[k]) for s in samples) if not isinstance(samples[0][k], bool)
                else samples[0][k]) for k in samples[0]}


def checkout(rev: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), rev], check=True,
                   capture_output=True)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--old", help="a git revision to measure beside this tree")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inventory = Path(tmp) / "hosts.yaml"
        inventory.write_text(INVENTORY)
        trees = {"this tree": REPO}
        if args.old:
            trees[args.old] = checkout(args.old, Path(tmp) / "old")
        try:
            results = {name: {label: median_of(tree, a, args.runs) for label, a in scenarios(inventory).items()}
                       for name, tree in trees.items()}
        finally:
            if args.old:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(trees[args.old])],
                               capture_output=True)
    print(f"{'':40} {'tree':>12} {'wall ms':>8} {'import ms':>9} {'modules':>7} {'rich ms':>7}")
    for label in scenarios(Path("x")):
        for name, by in results.items():
            r = by[label]
            print(f"{label:40} {name[:12]:>12} {r['wall_ms']:8.0f} {r['import_ms']:9.1f} {r['modules']:7.0f} "
                  f"{r['rich_ms'] if r['rich'] else 0:7.1f}")
    print(json.dumps({"runs": args.runs, "results": results}))


if __name__ == "__main__":
    main()
