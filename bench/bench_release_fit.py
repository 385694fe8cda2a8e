"""`inv classify FILE` told no release, before and after it finds the release in the log itself.

The held-out set: for each sglang release of the corpus, a seeded random sample of the raise / assert sites of its
startup modules (playbooks/upstream/startup-modules.yaml), each written as the traceback sglang prints for it: the
frame in site-packages with the release's own source line under it, then the exception line (placeholders given a
sample). Every piece of text is the release's own. Each excerpt is classified three ways, with the release's sites
behind the rules as fleet/logs/coverage.py does:
  told    the right release (what `--sglang R` does)
  before  no release: the rules alone (what `inv classify FILE` did)
  after   the release the log's clues fit (fleet/logs/release.py, fleet/logs/releasefit.py), its newest; with no
          clue, the releases whose sites print its exception lines (here each release's startup sites stand for
          the site index `inv classify` reads where it is cached)
and the figures are the share of excerpts whose class equals the told one, and how often the fitting releases
include the right one.

usage: .venv/bin/python bench/bench_release_fit.py [--per-release 20] [--seed 5151] [--bare]
  --bare  the exception line alone, no frame (a pasted one-liner: only the releases' sites can place it)
Needs the upstream corpus (`inv upstream`); reads no network.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.logs import coverage as rulecoverage  # noqa: E402
from fleet.logs.bysite import SiteClassifier  # noqa: E402
from fleet.logs.classify import catch_all_lines, classify_text  # noqa: E402
from fleet.logs.release import clues  # noqa: E402
from fleet.logs.releasefit import cached_versions, fits, fits_by_sites  # noqa: E402
from fleet.logs.rules import default_rules  # noqa: E402
from fleet.upstream import corpus  # noqa: E402
from fleet.upstream.siteindex import IndexedSite, SiteIndex  # noqa: E402
from fleet.upstream.sourcetext import sites  # noqa: E402
from fleet.upstream.unionindex import PerRelease  # noqa: E402

PREFIX = "[2026-12-04 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):"


def excerpt(module: str, line: int, function: str | None, code: str, exception_line: str, bare: bool) -> str:
    if bare:
        return exception_line + "\n"
    return (f"{PREFIX}\n  File \"/usr/local/lib/python3.12/dist-packages/{module}\", line {line}, in "
            f"{function or '<module>'}\n    {code}\n{exception_line}\n")


class Releases:
    """Each release's startup sites and a site classifier over them (what coverage.classify_sites builds)."""

    def __init__(self) -> None:
        self.modules = yaml.safe_load(rulecoverage.MODULES_FILE.read_text())
        self._found: dict[str, list[tuple[str, object, list[str]]]] = {}
        self._classifier: dict[str, SiteClassifier] = {}

    def found(self, version: str) -> list[tuple[str, object, list[str]]]:
        if version not in self._found:
            root = corpus.tree(corpus.require("sglang", version))
            out = []
            for m in self.modules[version]:
                lines = (root / m).read_text(encoding="utf-8", errors="replace").split("\n")
                out += [(m, s, lines) for s in sites("\n".join(lines))]
            self._found[version] = out
        return self._found[version]

    def classifier(self, version: str) -> SiteClassifier:
        if version not in self._classifier:
            index = SiteIndex(IndexedSite("sglang", version, m, s.line, s.function, s.kind, s.exception, s.text)
                              for m, s, _ in self.found(version))
            self._classifier[version] = SiteClassifier(index)
        return self._classifier[version]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-release", type=int, default=20)
    ap.add_argument("--seed", type=int, default=5151)
    ap.add_argument("--bare", action="store_true")
    args = ap.parse_args()
    rules = default_rules()
    releases = Releases()
    rng = random.Random(args.seed)
    total = before = after = hit = named = 0
    misses: list[str] = []
    versions = cached_versions("sglang")
    for version in versions:
        if version not in releases.modules:
            continue
        raised = [(m, s, lines) for m, s, lines in releases.found(version) if s.kind in ("raise", "assert")]
        for m, s, lines in rng.sample(raised, min(args.per_release, len(raised))):
            text = excerpt(m, s.line, s.function, lines[s.line - 1].strip(), s.as_line(), args.bare)
            told = classify_text(text, rules, releases.classifier(version)).log_class
            alone = classify_text(text, rules).log_class
            fit = fits(clues(text), "sglang")
            if fit is None or not fit.versions:  # no clue: the releases whose sites print its lines
                indexes = PerRelease({v: releases.classifier(v).index for v in releases.modules if v in versions})
                fit = fits_by_sites(catch_all_lines(text, rules), "sglang", indexes)
            pick = fit.pick if fit is not None else None
            auto = classify_text(text, rules, releases.classifier(pick) if pick else None).log_class
            total += 1
            before += alone == told
            after += auto == told
            named += pick is not None
            hit += fit is not None and version in fit.versions
            if auto != told:
                misses.append(f"  {version} {m}:{s.line}: told {told}, found {pick} -> {auto}")
    print(f"excerpts: {total} ({args.per_release} a release, seed {args.seed}{', bare lines' if args.bare else ''})")
    print(f"same class as told, before (rules alone): {before}/{total} = {before / total:.3f}")
    print(f"same class as told, after (release found): {after}/{total} = {after / total:.3f}")
    print(f"a release found: {named}/{total}; the right one among those that fit: {hit}/{total} = {hit / total:.3f}")
    for line in misses[:20]:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
