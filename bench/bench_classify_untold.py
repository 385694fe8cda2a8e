"""`inv classify FILE` told no release against `inv classify --sglang R FILE`, on the command's own path.

The sample: for each sglang release R of the corpus, a seeded random sample of the raise / assert sites of R's
whole site index (every module the server can run, not only the startup ones), each written as the exception line
sglang prints for it (placeholders given a sample): alone, as an operator pastes it (no frame, no version: only the
releases' sites can place it), or under its traceback frame with --frames. Every text is the release's own.

Each excerpt is classified as the command does (fleet/cli/classify.py):
  told    --sglang R: R's sites, plus the flashinfer the log fits (fleet/logs/whichrelease.find)
  untold  no option: the releases find() picks from the log's clues, else by placing its exception lines among
          every cached release's site index (`inv upstream` builds them; the command builds missing ones)
  rules   the rules alone, for reference
The figures: the share of excerpts whose untold class equals the told one, and how often R is among the releases
the answer names.

usage: .venv/bin/python bench/bench_classify_untold.py [--per-release 20] [--seed 5151] [--frames]
Needs the upstream corpus with its site indexes (`inv upstream`); reads no network.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.logs import whichrelease  # noqa: E402
from fleet.logs.bysite import SiteClassifier  # noqa: E402
from fleet.logs.classify import classify_text  # noqa: E402
from fleet.logs.rules import default_rules  # noqa: E402
from fleet.upstream import corpus, indexes, siteindex  # noqa: E402
from fleet.upstream.siteindex import IndexedSite, SiteIndex  # noqa: E402
from fleet.upstream.sourcetext import PLACEHOLDER  # noqa: E402

PREFIX = "[2026-12-04 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):"


def exception_line(site: IndexedSite, sample: str = "1") -> str:
    """The line sglang prints for the site (sourcetext.Site.as_line's rendering)."""
    message = site.text.replace(PLACEHOLDER, sample)
    if site.kind == "assert":
        return f"AssertionError: {message}"
    return f"{site.exception}: {message}" if site.exception else message


def excerpt(site: IndexedSite, code: str, frames: bool) -> str:
    if not frames:
        return exception_line(site) + "\n"
    return (f"{PREFIX}\n  File \"/usr/local/lib/python3.12/dist-packages/{site.module}\", line {site.line}, in "
            f"{site.function or '<module>'}\n    {code}\n{exception_line(site)}\n")


class Sites:
    """Every cached release's sites, loaded once (the command loads them once per run)."""

    def __init__(self) -> None:
        self.sites: dict[tuple[str, str], list[IndexedSite]] = {}
        self.index: dict[str, dict[str, SiteIndex]] = {}
        for package in indexes.PACKAGES:
            self.index[package] = {}
            for version in indexes.versions(package):
                root = corpus.tree(corpus.require(package, version))
                found = siteindex.load_cached(package, version, root) or []
                self.sites[(package, version)] = found
                if found:
                    self.index[package][version] = SiteIndex(found)

    def classifier(self, sglang: str | None, flashinfer: str | None) -> SiteClassifier | None:
        found = [*self.sites.get(("sglang", sglang or ""), []),
                 *self.sites.get(("flashinfer-python", flashinfer or ""), [])]
        return SiteClassifier(SiteIndex(found)) if found else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-release", type=int, default=20)
    ap.add_argument("--seed", type=int, default=5151)
    ap.add_argument("--frames", action="store_true")
    args = ap.parse_args()
    missing = indexes.missing()
    if missing:
        print(f"{len(missing)} releases have no site index yet (run `inv upstream`): {missing[:4]}")
        return 2
    rules = default_rules()
    start = time.monotonic()
    sites = Sites()
    loaded = time.monotonic() - start
    rng = random.Random(args.seed)
    total = same = alone = named = among = 0
    misses: list[str] = []
    untold_s = 0.0
    for version in indexes.versions("sglang"):
        root = corpus.tree(corpus.require("sglang", version))
        raised = [s for s in sites.sites[("sglang", version)] if s.kind in ("raise", "assert")]
        for site in rng.sample(raised, min(args.per_release, len(raised))):
            lines = (root / site.module).read_text(encoding="utf-8", errors="replace").split("\n")
            text = excerpt(site, lines[site.line - 1].strip(), args.frames)
            told_found = whichrelease.find(text, rules, version, None, indexes_of=sites.index.__getitem__)
            told_fi = whichrelease.used(told_found, "flashinfer-python")
            told = classify_text(text, rules, sites.classifier(version, told_fi))
            t0 = time.monotonic()
            found = whichrelease.find(text, rules, None, None, indexes_of=sites.index.__getitem__)
            sg, fi = whichrelease.used(found, "sglang"), whichrelease.used(found, "flashinfer-python")
            untold = classify_text(text, rules, sites.classifier(sg, fi))
            untold_s += time.monotonic() - t0
            total += 1
            same += untold.log_class == told.log_class
            alone += classify_text(text, rules).log_class == told.log_class
            named += sg is not None
            among += any(f.package == "sglang" and version in f.versions for f in found)
            if untold.log_class != told.log_class:
                misses.append(f"  {version} {site.module}:{site.line}: told {told.log_class}, found {sg} -> "
                              f"{untold.log_class}: {exception_line(site)[:100]!r}")
    kind = "under a traceback frame" if args.frames else "bare exception lines"
    print(f"excerpts: {total} ({args.per_release} a release of {len(indexes.versions('sglang'))}, seed {args.seed}, "
          f"{kind}); indexes loaded in {loaded:.1f} s")
    print(f"same class as --sglang R, told nothing: {same}/{total} = {same / total:.3f}")
    print(f"same class as --sglang R, rules alone:  {alone}/{total} = {alone / total:.3f}")
    print(f"a release named: {named}/{total}; R among the releases the answer names: {among}/{total} = "
          f"{among / total:.3f}; {1000 * untold_s / total:.0f} ms an excerpt to find and classify")
    for line in misses[:25]:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
