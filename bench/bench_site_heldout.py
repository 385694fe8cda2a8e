"""The honest record of the site classes (issue 51): each blind fresh draw classified by the code it was FIRST
measured on (the commit that labelled it, before any fix it prompted), site by site, with the rule that decided.

Only these first measurements are out of sample; every later figure on a draw is tuned on it. For each draw this
checks its labelling commit out in a temporary worktree, runs that commit's own bench/bench_site_precision.py
(`--index startup`, as the draws were measured) with its classify_line wrapped to record the deciding rule (Event
rule name: `site:<entry>` for a site class of playbooks/sites/classes.yaml, else a rule of playbooks/rules), and
pools the record per deciding rule: held-out precision with its 95% Wilson interval.

usage: .venv/bin/python bench/bench_site_heldout.py [--out bench/results/site-heldout.jsonl]
       writes one JSON line per site, then prints the per-rule table (and --summary FILE writes it).
       .venv/bin/python bench/bench_site_heldout.py --replay bench/results/site-heldout.jsonl
       ... --replay FILE --policy: as if playbooks/sites/heldout.yaml's policy had held (FITTED on these draws).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]
from fleet.logs.proportion import wilson  # noqa: E402

LABELS = REPO / "tests" / "fixtures" / "site_labels"
# draw -> the commit it was labelled on (its code is the code it was drawn after; `git log --grep fresh`).
# fresh: labelled in 914cfe4, measured in cf09487 (which adds only bench/bench_site_precision.py).
FIRST = {"fresh": "cf09487", "fresh2": "7d0e767", "fresh3": "8703a9d", "fresh4": "c4ebc78", "fresh5": "8c514df",
         "fresh6": "08c2a8b", "fresh7": "9af127a", "fresh8": "b85373f",
         "fresh9": "76c856f"}

# run inside the old worktree, its fleet first on sys.path
_PROBE = r"""
import json, sys
from pathlib import Path
sys.argv = ["x"]
sys.path[:0] = [".", "bench"]
import fleet; assert fleet.__file__.startswith(str(Path.cwd())), fleet.__file__
import bench_site_precision as bsp
seen = []
real = bsp.classify_line
def wrapped(*a, **k):
    m = real(*a, **k)
    seen.append(m)
    return m
bsp.classify_line = wrapped
import yaml
for name in sys.argv_files:
    pass
"""


def _probe(files: list[Path]) -> str:
    return _PROBE.replace("for name in sys.argv_files:\n    pass\n", f"""
for path in {[str(f) for f in files]!r}:
    sample = yaml.safe_load(Path(path).read_text())
    seen.clear()
    try:
        version, tally = bsp.measure(Path(path), "startup")
    except TypeError:
        version, tally = bsp.measure(Path(path))
    for entry, m in zip(sample["sites"], seen, strict=True):
        said = str(m.rule.log_class) if m is not None and bsp.rulecoverage.specific(m) else "FATAL"
        print(json.dumps({{"file": Path(path).stem, "release": version, "module": entry["module"],
                          "line": entry["line"], "text": entry["text"], "label": entry["label"], "said": said,
                          "rule": m.rule.name if m is not None else None}}))
""")


def record(draw: str, commit: str) -> list[dict[str, object]]:
    files = sorted(p for p in LABELS.glob(f"*-{draw}.yaml"))
    where = Path(tempfile.gettempdir()) / f"h-class12-{commit}"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), commit], check=True,
                   capture_output=True)
    try:
        # labels as they stand now (never changed after labelling but for 26c1267, before fresh5 was drawn)
        out = subprocess.run([sys.executable, "-c", _probe(files)], cwd=where, capture_output=True,
                             text=True)
        if out.returncode:
            raise SystemExit(f"{draw} on {commit}: {out.stderr[-2000:]}")
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)], check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    for row in rows:
        row["draw"], row["commit"] = draw, commit
    return rows


def per_rule(rows: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        if row["said"] != "FATAL":
            table[str(row["rule"])][0] += 1
            table[str(row["rule"])][1] += row["said"] == row["label"]
    out = {}
    for rule, (flagged, right) in sorted(table.items(), key=lambda kv: (kv[1][1] / kv[1][0], -kv[1][0])):
        low, high = wilson(right, flagged)
        out[rule] = {"flagged": flagged, "right": right, "precision": round(right / flagged, 3),
                     "precision_95": [round(low, 3), round(high, 3)]}
    return out


def figures(rows: list[dict[str, object]]) -> dict[str, object]:
    flagged = [r for r in rows if r["said"] != "FATAL"]
    right = sum(r["said"] == r["label"] for r in flagged)
    specific = sum(r["label"] != "FATAL" for r in rows)
    p, r = wilson(right, len(flagged)), wilson(right, specific)
    return {"sites": len(rows), "flagged": len(flagged), "right": right,
            "precision": round(right / len(flagged), 3) if flagged else None, "precision_95": [round(x, 3) for x in p],
            "labelled_specific": specific, "recall": round(right / specific, 3) if specific else None,
            "recall_95": [round(x, 3) for x in r]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "site-heldout.jsonl")
    ap.add_argument("--summary", type=Path, default=None)
    ap.add_argument("--draws", nargs="*", default=list(FIRST))
    ap.add_argument("--replay", type=Path, default=None, help="read this record instead of building it")
    ap.add_argument("--policy", action="store_true", help="with --replay: untrusted entries said FATAL")
    args = ap.parse_args()
    if args.replay:
        rows = [json.loads(line) for line in args.replay.read_text().splitlines()]
        if args.policy:
            from fleet.logs.bysite import HELDOUT_FILE, load_classes
            untrusted = {f"site:{name}" for name in load_classes().untrusted}
            print(f"replayed with {HELDOUT_FILE.name}'s policy, FITTED ON THESE DRAWS: {sorted(untrusted)}")
            rows = [{**r, "said": "FATAL"} if r["rule"] in untrusted else r for r in rows]
    else:
        rows = [row for draw in args.draws for row in record(draw, FIRST[draw])]
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"draws": {d: figures([r for r in rows if r["draw"] == d]) for d in args.draws},
               "pooled": figures(rows), "per_rule": per_rule(rows)}
    for name, fig in {**summary["draws"], "pooled": summary["pooled"]}.items():  # type: ignore[dict-item]
        print(f"{name:8} {fig}")
    for rule, fig in summary["per_rule"].items():  # type: ignore[union-attr]
        print(f"{rule:44} {fig['right']:>4}/{fig['flagged']:<4} {fig['precision']:.3f} {fig['precision_95']}")
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
