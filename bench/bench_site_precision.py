"""Precision of fleet's log classification on hand-labelled sites of real sglang releases (issue 51: "precision on
a fresh sample of at least 150 sites across three releases, labelled first: at least 0.95, with its interval").

Each file of tests/fixtures/site_labels names a release and its sites, each labelled by hand before any classifier
ran (bench/draw_site_sample.py draws them). Each site becomes the line a log shows (sourcetext.Site.as_line) and is
classified as `inv classify --sglang R` does: the rules with the release's whole site index behind them
(`--index startup`: only the startup modules', as tests/upstream/test_site_classes.py does). A site is flagged when
fleet names a specific class (not a catch-all, coverage.specific); precision = flagged with the labelled class /
flagged, recall = flagged right / labelled with a specific class; 95% Wilson intervals, per release and overall.

usage: .venv/bin/python bench/bench_site_precision.py [--index release|startup] [FILE ...]   (default: *-fresh*.yaml)
       prints each wrong or missed site, a table, then one JSON line. Needs the upstream corpus; reads no network.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]
from fleet.logs import coverage as rulecoverage  # noqa: E402
from fleet.logs.bysite import SiteClassifier  # noqa: E402
from fleet.logs.classify import classify_line  # noqa: E402
from fleet.logs.proportion import wilson  # noqa: E402
from fleet.logs.rules import default_rules  # noqa: E402
from fleet.upstream import corpus, siteindex  # noqa: E402
from fleet.upstream.sourcetext import Site, sites  # noqa: E402

LABELS = REPO / "tests" / "fixtures" / "site_labels"
TEXT = 100




@dataclass
class Tally:
    sites: int = 0
    flagged: int = 0
    right: int = 0
    specific_labels: int = 0
    wrong: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.sites += other.sites
        self.flagged += other.flagged
        self.right += other.right
        self.specific_labels += other.specific_labels

    def figures(self) -> dict[str, object]:
        p_low, p_high = wilson(self.right, self.flagged)
        r_low, r_high = wilson(self.right, self.specific_labels)
        return {"sites": self.sites, "flagged": self.flagged, "right": self.right,
                "precision": round(self.right / self.flagged, 4) if self.flagged else None,
                "precision_95": [round(p_low, 4), round(p_high, 4)],
                "labelled_specific": self.specific_labels,
                "recall": round(self.right / self.specific_labels, 4) if self.specific_labels else None,
                "recall_95": [round(r_low, 4), round(r_high, 4)]}


def classifier(version: str, index: str) -> tuple[SiteClassifier, dict[tuple[str, int, str], Site]]:
    """The release's site classifier as `index` says, and its startup sites by (module, line, text[:100])."""
    root = corpus.tree(corpus.require("sglang", version))
    modules = yaml.safe_load(rulecoverage.MODULES_FILE.read_text())[version]
    found = {(m, s.line, s.text[:TEXT]): s for m in modules
             for s in sites((root / m).read_text(encoding="utf-8", errors="replace"))}
    if index == "release":
        indexed = siteindex.load_or_build("sglang", version, root)
    else:
        indexed = [siteindex.IndexedSite("sglang", version, m, s.line, s.function, s.kind, s.exception, s.text)
                   for (m, _, _), s in found.items()]
    return SiteClassifier(siteindex.SiteIndex(indexed)), found


def measure(path: Path, index: str) -> tuple[str, Tally]:
    sample = yaml.safe_load(path.read_text())
    version = sample["release"]
    by_site, found = classifier(version, index)
    rules = default_rules()
    tally = Tally()
    for entry in sample["sites"]:
        site = found[(entry["module"], entry["line"], entry["text"])]  # KeyError: the file no longer fits the release
        match = classify_line(site.as_line(), rules, by_site)
        said = str(match.rule.log_class) if rulecoverage.specific(match) and match is not None else "FATAL"
        label = entry["label"]
        where = f"{version} {entry['module']}:{entry['line']} said {said}"
        rule = f" ({match.rule.name})" if match is not None else ""
        tally.sites += 1
        tally.specific_labels += label != "FATAL"
        if said != "FATAL":
            tally.flagged += 1
            if said == label:
                tally.right += 1
            else:
                tally.wrong.append(f"{where}{rule}, is {label}: {entry['text'][:80]!r}")
        elif label != "FATAL":
            tally.missed.append(f"{where}, is {label}: {entry['text'][:80]!r}")
    return version, tally


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--index", choices=("release", "startup"), default="release")
    args = ap.parse_args()
    files = args.files or sorted(LABELS.glob("*-fresh*.yaml"))
    total = Tally()
    rows: dict[str, dict[str, object]] = {}
    for path in files:
        version, tally = measure(path, args.index)
        for line in tally.wrong:
            print(f"WRONG  {line}")
        for line in tally.missed:
            print(f"missed {line}")
        total.add(tally)
        rows[f"{path.stem}"] = tally.figures()
    rows["overall"] = total.figures()
    print(f"{'sample':34} {'sites':>5} {'flagged':>7} {'right':>5} {'precision (95% Wilson)':>26} {'recall (95%)':>22}")
    for name, row in rows.items():
        p_low, p_high = row["precision_95"]  # type: ignore[misc]
        r_low, r_high = row["recall_95"]  # type: ignore[misc]
        print(f"{name:34} {row['sites']:>5} {row['flagged']:>7} {row['right']:>5} "
              f"{row['precision']!s:>8} ({p_low:.3f}-{p_high:.3f}) {row['recall']!s:>8} ({r_low:.3f}-{r_high:.3f})")
    print(json.dumps({"index": args.index, "samples": rows}))


if __name__ == "__main__":
    main()
