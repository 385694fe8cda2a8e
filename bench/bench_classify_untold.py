"""`inv classify FILE` told no release against `inv classify --sglang R FILE`, on the command's own path; and how
long an untold classify takes with the union of the releases' site indexes against the per-release indexes it
loaded before (a ratio, same run).

The sample: for each sglang release R of the corpus, a seeded random sample of the raise / assert sites of R's
whole site index (every module the server can run, not only the startup ones), each written as the exception line
sglang prints for it (placeholders given a sample): alone, as an operator pastes it (no frame, no version: only the
releases' sites can place it), or under its traceback frame with --frames. Every text is the release's own.

Each excerpt is classified as the command does (fleet/cli/classify.py):
  told    --sglang R: R's sites, plus the flashinfer the log fits (fleet/logs/whichrelease.find)
  untold  no option: the releases find() picks from the log's clues, else by placing its exception lines among
          every cached release's sites: their union (fleet/upstream/unionindex.py, built by `inv upstream`)
  rules   the rules alone, for reference
The figures: the share of excerpts whose untold class equals the told one, and how often R is among the releases
the answer names; and whether the union names the same releases as each release's own index, one after the other
(the way before the union), for every excerpt.

Speed (--speed N, default 5): N fresh processes each way, alternated, each loading what the command loads for one
pasted line and classifying it: `union` (unionindex.load of both packages, digests checked; the command now)
against `before` (every cached release's own index loaded and indexed, the cyclic collector running, as the
command did) and `per-release` (the same with the collector paused while loading, siteindex.collector_paused);
CPU and wall seconds, the median of each, and each as a multiple of the union's.

usage: .venv/bin/python bench/bench_classify_untold.py [--per-release 20] [--seed 5151] [--frames] [--speed 5]
Needs the upstream corpus with its site indexes and their union (`inv upstream`); reads no network.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fleet.logs import whichrelease  # noqa: E402
from fleet.logs.bysite import SiteClassifier  # noqa: E402
from fleet.logs.classify import classify_text  # noqa: E402
from fleet.logs.rules import default_rules  # noqa: E402
from fleet.upstream import corpus, indexes, siteindex, unionindex  # noqa: E402
from fleet.upstream.siteindex import IndexedSite, SiteIndex  # noqa: E402
from fleet.upstream.sourcetext import PLACEHOLDER  # noqa: E402
from fleet.upstream.unionindex import PerRelease, Placer  # noqa: E402

PREFIX = "[2026-12-04 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):"
# A line an operator pastes: sglang's own text (0.5.23 srt/arg_groups/serving_hook.py:220, and every release
# before it in server_args.py), no rule names it, no clue in it: only the releases' sites can place it.
PASTED = "[2026-12-04 10:00:00 TP0] ValueError: Invalid disaggregation_mode=prefil\n"


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


def per_release(package: str) -> PerRelease:
    """Every cached release's own index, loaded and indexed one after the other: the way before the union."""
    out: dict[str, SiteIndex] = {}
    for version in indexes.versions(package):
        found = siteindex.load_cached(package, version, corpus.tree(corpus.require(package, version)))
        if found:
            out[version] = SiteIndex(found)
    return PerRelease(out)


def _before(package: str) -> PerRelease:
    """What the command's `_indexes_of` did before the union: any missing index built, then every one loaded."""
    indexes.build_missing(packages=(package,))
    return per_release(package)


class Sites:
    """Every cached release's sites, loaded once (the command loads them once per run), and the union."""

    def __init__(self) -> None:
        self.sites: dict[tuple[str, str], list[IndexedSite]] = {}
        self.index: dict[str, PerRelease] = {}
        self.union: dict[str, Placer] = {}
        self._classifiers: dict[tuple[str | None, str | None], SiteClassifier | None] = {}
        for package in indexes.PACKAGES:
            self.index[package] = per_release(package)
            for version, index in self.index[package].indexes.items():
                self.sites[(package, version)] = list(index.sites)
            union = unionindex.load(package)
            if union is None:
                raise SystemExit(f"no current union of {package}'s site indexes: run `inv upstream`")
            self.union[package] = union

    def classifier(self, sglang: str | None, flashinfer: str | None) -> SiteClassifier | None:
        """The classifier the command builds for these releases (built once here: it is the same each time)."""
        if (sglang, flashinfer) not in self._classifiers:
            found = [*self.sites.get(("sglang", sglang or ""), []),
                     *self.sites.get(("flashinfer-python", flashinfer or ""), [])]
            self._classifiers[(sglang, flashinfer)] = SiteClassifier(SiteIndex(found)) if found else None
        return self._classifiers[(sglang, flashinfer)]


WAYS = {"before": "every release's own index, loaded as before (the cyclic collector running through it)",
        "per-release": "every release's own index, the collector paused while loading",
        "union": "the union of the releases' indexes (the command now)"}


def child(way: str) -> int:
    """One pasted line classified as the command does, in this fresh process: the releases placed by `way`."""
    import contextlib

    if way == "before":  # what loading cost before siteindex.collector_paused
        siteindex.collector_paused = contextlib.nullcontext  # type: ignore[assignment]
    cpu, wall = time.process_time(), time.perf_counter()
    from fleet.cli import classify

    rules = default_rules()
    indexes_of = classify._indexes_of if way == "union" else _before
    found = whichrelease.find(PASTED, rules, indexes_of=indexes_of)
    sglang, flashinfer = whichrelease.used(found, "sglang"), whichrelease.used(found, "flashinfer-python")
    verdict = classify_text(PASTED, rules, classify._site_classifier(sglang, flashinfer))
    print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
                      "class": str(verdict.log_class), "fits": [f.describe() for f in found]}))
    return 0


def speed(runs: int) -> None:
    took: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    said: dict[str, str] = {}
    for _ in range(runs):
        for way in took:  # alternated: on a shared machine the load moves between runs
            done = subprocess.run([sys.executable, __file__, "--child", way], capture_output=True, text=True,
                                  check=True)
            answer = json.loads(done.stdout)
            took[way].append(answer)
            said[way] = f"{answer['class']}, {'; '.join(answer['fits'])}"
    cpu = {way: statistics.median(t["cpu"] for t in ts) for way, ts in took.items()}
    wall = {way: statistics.median(t["wall"] for t in ts) for way, ts in took.items()}
    print(f"one pasted line, untold, {runs} fresh processes each way (median; the interpreter's start not counted):")
    for way, what in WAYS.items():
        print(f"  {way:<11} cpu {cpu[way]:.2f} s, wall {wall[way]:.2f} s ({what}): {cpu[way] / cpu['union']:.1f}x "
              f"the union's cpu, {wall[way] / wall['union']:.1f}x its wall")
    print(f"  the same answer each way: {len(set(said.values())) == 1} ({said['union']})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-release", type=int, default=20)
    ap.add_argument("--seed", type=int, default=5151)
    ap.add_argument("--frames", action="store_true")
    ap.add_argument("--speed", type=int, default=5, help="fresh processes each way (0: none)")
    ap.add_argument("--child", choices=tuple(WAYS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    missing = indexes.missing()
    if missing:
        print(f"{len(missing)} releases have no site index yet (run `inv upstream`): {missing[:4]}")
        return 2
    rules = default_rules()
    start = time.monotonic()
    sites = Sites()
    loaded = time.monotonic() - start
    rng = random.Random(args.seed)
    total = same = alone = named = among = agree = 0
    misses: list[str] = []
    untold_s = 0.0
    for version in indexes.versions("sglang"):
        root = corpus.tree(corpus.require("sglang", version))
        raised = [s for s in sites.sites[("sglang", version)] if s.kind in ("raise", "assert")]
        for site in rng.sample(raised, min(args.per_release, len(raised))):
            lines = (root / site.module).read_text(encoding="utf-8", errors="replace").split("\n")
            text = excerpt(site, lines[site.line - 1].strip(), args.frames)
            told_found = whichrelease.find(text, rules, version, None, indexes_of=sites.union.__getitem__)
            told_fi = whichrelease.used(told_found, "flashinfer-python")
            told = classify_text(text, rules, sites.classifier(version, told_fi))
            t0 = time.monotonic()
            found = whichrelease.find(text, rules, None, None, indexes_of=sites.union.__getitem__)
            sg, fi = whichrelease.used(found, "sglang"), whichrelease.used(found, "flashinfer-python")
            untold = classify_text(text, rules, sites.classifier(sg, fi))
            untold_s += time.monotonic() - t0
            before = whichrelease.find(text, rules, None, None, indexes_of=sites.index.__getitem__)
            agree += found == before
            total += 1
            same += untold.log_class == told.log_class
            alone += classify_text(text, rules).log_class == told.log_class
            named += sg is not None
            among += any(f.package == "sglang" and version in f.versions for f in found)
            if untold.log_class != told.log_class:
                misses.append(f"  {version} {site.module}:{site.line}: told {told.log_class}, found {sg} -> "
                              f"{untold.log_class}: {exception_line(site)[:100]!r}")
            if found != before:
                misses.append(f"  {version} {site.module}:{site.line}: union {[f.describe() for f in found]} != "
                              f"per release {[f.describe() for f in before]}")
    kind = "under a traceback frame" if args.frames else "bare exception lines"
    print(f"excerpts: {total} ({args.per_release} a release of {len(indexes.versions('sglang'))}, seed {args.seed}, "
          f"{kind}); every index loaded in {loaded:.1f} s")
    print(f"same class as --sglang R, told nothing: {same}/{total} = {same / total:.3f}")
    print(f"same class as --sglang R, rules alone:  {alone}/{total} = {alone / total:.3f}")
    print(f"a release named: {named}/{total}; R among the releases the answer names: {among}/{total} = "
          f"{among / total:.3f}; {1000 * untold_s / total:.0f} ms an excerpt to find and classify")
    print(f"the union names the same releases as each release's own index: {agree}/{total}")
    for line in misses[:25]:
        print(line)
    if args.speed:
        speed(args.speed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
