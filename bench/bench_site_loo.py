"""Leave-one-group-out estimate of the site classes' precision on a sample not yet drawn (issue 51), before drawing.

The labelled sites of tests/fixtures/site_labels fall in groups: each fresh draw (*-fresh.yaml .. *-fresh5.yaml,
three releases each) and the 0.5.23 samples. The classes were tuned on the errors of earlier groups, so their
in-sample precision overstates what a new sample gives. For each group k, every alternative (one regex of an
entry's `text` or `not_text`) of playbooks/sites/classes.yaml that matches the sites of group k alone, among all
labelled sites, is dropped, as if it had been written without seeing k; then group k is measured as
bench/bench_site_precision.py --index startup does. A proxy: it cannot undo what k taught beyond such alternatives
(entry order, areas, the precise rules of playbooks/rules).

usage: .venv/bin/python bench/bench_site_loo.py   (prints each wrong site, one row per group, pooled; 95% Wilson)
Needs the upstream corpus; reads no network.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]
import bench_site_precision as precision  # noqa: E402
from benchstats import wilson  # noqa: E402

from fleet import yamlfile  # noqa: E402
from fleet.logs import bysite  # noqa: E402
from fleet.logs import coverage as rulecoverage  # noqa: E402
from fleet.logs.classify import classify_line  # noqa: E402
from fleet.logs.rules import default_rules  # noqa: E402
from fleet.upstream import siteindex  # noqa: E402
from fleet.upstream.sourcetext import Site  # noqa: E402

NEVER = "(?!x)x"  # an entry whose every text alternative was dropped fits nothing


def group(path: Path) -> str:
    return path.stem.rsplit("-", 1)[-1] if "-fresh" in path.stem else "0.5.23"


def samples() -> list[tuple[str, siteindex.SiteIndex, list[tuple[str, Site]]]]:
    out = []
    for path in sorted(precision.LABELS.glob("*.yaml")):
        sample = yaml.safe_load(path.read_text())
        _, found = precision.classifier(sample["release"], "startup")
        index = siteindex.SiteIndex(siteindex.IndexedSite("sglang", sample["release"], m, s.line, s.function, s.kind,
                                                          s.exception, s.text) for (m, _, _), s in found.items())
        rows = [(e["label"], found[(e["module"], e["line"], e["text"])]) for e in sample["sites"]]
        out.append((group(path), index, rows))
    return out


def main() -> None:
    spec = yamlfile.load(bysite.CLASSES_FILE).parse(bysite.SiteClassesFile)
    drawn = samples()
    groups = sorted({g for g, _, _ in drawn}, key=lambda g: (g == "0.5.23", g))
    seen: dict[tuple[int, str, int], set[str]] = {}  # (entry, field, alternative) -> groups whose sites it matches
    for g, _, rows in drawn:
        for _, site in rows:
            for i, entry in enumerate(spec.classes):
                for name in ("text", "not_text"):
                    for j, alt in enumerate(getattr(entry, name) or []):
                        if re.search(alt, site.text, re.I):
                            seen.setdefault((i, name, j), set()).add(g)
    rules = default_rules()
    pooled = [0, 0, 0]
    for k in groups:
        held = spec.model_copy(deep=True)
        for i, entry in enumerate(held.classes):
            for name in ("text", "not_text"):
                alts = getattr(entry, name)
                if alts:
                    keep = [a for j, a in enumerate(alts) if seen.get((i, name, j)) != {k}]
                    setattr(entry, name, keep if keep or name == "not_text" else [NEVER])
        classes = bysite.SiteClasses(held, str(bysite.CLASSES_FILE))
        dropped = sum(1 for gs in seen.values() if gs == {k})
        flagged = right = specific = 0
        for g, index, rows in drawn:
            if g != k:
                continue
            by_site = bysite.SiteClassifier(index, classes)
            for label, site in rows:
                match = classify_line(site.as_line(), rules, by_site)
                said = str(match.rule.log_class) if match is not None and rulecoverage.specific(match) else "FATAL"
                specific += label != "FATAL"
                flagged += said != "FATAL"
                right += said == label != "FATAL"
                if said not in ("FATAL", label):
                    print(f"WRONG  {k}: said {said}, is {label}: {site.text[:80]!r}")
        pooled = [pooled[0] + flagged, pooled[1] + right, pooled[2] + specific]
        print(_row(f"{k} ({dropped} alternatives dropped)", flagged, right, specific))
    print(_row("pooled", *pooled))


def _row(name: str, flagged: int, right: int, specific: int) -> str:
    p_low, p_high = wilson(right, flagged)
    r_low, r_high = wilson(right, specific)
    return (f"{name:36} precision {right}/{flagged} = {right / flagged:.3f} ({p_low:.3f}-{p_high:.3f})  "
            f"recall {right}/{specific} = {right / specific:.3f} ({r_low:.3f}-{r_high:.3f})")


if __name__ == "__main__":
    main()
