"""The whole-tree audit (`inv audit --full`, SM 120) over real releases: how many gates it flags with today's
rules and with the rules before the issue "Real flashinfer and sglang releases as ground truth" (fleet/patches/audit.py
at commit bb8fde7, read from git), and the precision of today's flags against the hand-labelled truth
(tests/upstream/truth/whole_tree.yaml), with a 95% Wilson interval. A flagged gate with no label fails the run:
label it first.

usage: .venv/bin/python bench/bench_audit_precision.py [--old-commit bb8fde7]   (a table, then one JSON line)
Needs the upstream corpus (`inv upstream`); reads no network.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests/upstream")]
import truth  # noqa: E402

from fleet.logs.proportion import wilson  # noqa: E402
from fleet.patches import audit as archgate  # noqa: E402
from fleet.patches import offline  # noqa: E402

VERSIONS = [{"flashinfer-python": "0.6.16"}, {"flashinfer-python": "0.7.4"}, {"sglang": "0.5.9"},
            {"sglang": "0.5.23"}]




def old_archgate(commit: str):  # noqa: ANN201 - a module from history
    text = subprocess.run(["git", "show", f"{commit}:fleet/patches/audit.py"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout
    path = Path(tempfile.mkdtemp()) / "archgate_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("archgate_old", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["archgate_old"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-commit", default="bb8fde7")
    args = ap.parse_args()
    old = old_archgate(args.old_commit)
    labels = truth.labels("whole_tree.yaml")
    rows, unlabelled = [], []
    for versions in VERSIONS:
        start = time.monotonic()
        rels = offline.releases(versions, fetch=False)
        scan = offline.scan_tree(rels, archgate.scope_for(list(rels), full=True))
        took = time.monotonic() - start
        new = [g for g in archgate.evaluate(scan, 120) if g.excludes]
        old_scan = {f: {"kind": i["kind"], "lines": [x[:2] for x in i["lines"]]} for f, i in scan.items()}
        old_hits = sum(1 for g in old.evaluate(old_scan, 120) if g.excludes)
        texts: dict[str, str] = {}
        tp = fp = 0
        for g in new:
            if g.file not in texts:
                pkg, rel = g.file.split("/", 1)
                texts[g.file] = (rels[pkg].package(pkg) / rel).read_text(encoding="utf-8", errors="replace")
            lab = labels.get(truth.key(g, texts[g.file]))
            if lab is None:
                unlabelled.append(truth.key(g, texts[g.file]))
            elif lab.excludes:
                tp += 1
            else:
                fp += 1
        lo, hi = wilson(tp, tp + fp)
        unread = sum(1 for g in archgate.evaluate(scan, 120) if g.error)
        rows.append({"release": " ".join(f"{d} {v}" for d, v in versions.items()), "files": len(scan),
                     "old_flags": old_hits, "flags": len(new), "tp": tp, "fp": fp,
                     "precision": round(tp / (tp + fp), 3) if tp + fp else None,
                     "ci95": [round(lo, 3), round(hi, 3)], "not_evaluated": unread, "scan_s": round(took, 1)})
    print(f"{'release':28} {'files':>6} {'old flags':>9} {'flags':>6} {'tp':>4} {'fp':>3} {'precision':>9} "
          f"{'95% CI':>13} {'not evaluated':>13}")
    for r in rows:
        print(f"{r['release']:28} {r['files']:>6} {r['old_flags']:>9} {r['flags']:>6} {r['tp']:>4} {r['fp']:>3} "
              f"{r['precision']!s:>9} {str(r['ci95']):>13} {r['not_evaluated']:>13}")
    tp, fp = sum(r["tp"] for r in rows), sum(r["fp"] for r in rows)
    lo, hi = wilson(tp, tp + fp)
    total = {"tp": tp, "fp": fp, "precision": round(tp / (tp + fp), 3), "ci95": [round(lo, 3), round(hi, 3)]}
    print(f"all: precision {total['precision']} (95% CI {total['ci95'][0]}-{total['ci95'][1]}, {tp + fp} flags)")
    print(json.dumps({"rows": rows, "total": total, "unlabelled": unlabelled}))
    if unlabelled:
        sys.exit(f"{len(unlabelled)} flagged gates have no label in tests/upstream/truth/whole_tree.yaml")


if __name__ == "__main__":
    main()
