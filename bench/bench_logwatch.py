"""Lines per second through the log classifier, over a large synthetic mix of normal and failure lines.

    .venv/bin/python bench/bench_logwatch.py [--lines N] [--failure-share F] [--seed S] [--sglang V --flashinfer V]

Measures LineClassifier.feed (normalise + rules + grouping) and the LogWatcher on the same text fed as
a growing stream in 4 KiB chunks, the way Invoke hands it over; then, when the corpus has the releases, the same
classifier with their site index behind the rules (ratio to the rules alone, same run), the index's size, load
and build time, and one lookup's cost; and the live follower as deploy and `inv logs` run it (the host's sglang
release's cached sites only, bysite.for_release), as a ratio to the rules alone in the same run. The
journal-to-report delay on sandbox hosts is a separate benchmark.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from fleet.logs import bysite
from fleet.logs.bysite import SiteClassifier
from fleet.logs.classify import LineClassifier
from fleet.logs.rules import load_rules
from fleet.logs.watch import FatalLogLine, LogWatcher
from fleet.upstream import corpus as upstream
from fleet.upstream import siteindex

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"
CHUNK = 4096
REPEATS = 5  # each classifier configuration, alternated
WATCHER_LINES = 50_000  # the cumulative-buffer slices below cost O(n^2) to build (outside the timing)


def corpus(lines: int, failure_share: float, seed: int) -> list[str]:
    """Normal lines from the recorded startups, failure excerpts mixed in at `failure_share`."""
    rng = random.Random(seed)
    normal = [line for name in ("sglang_startup_ready.log", "sglang_startup_ready_sm120_warnings.log")
              for line in (FIXTURES / name).read_text().splitlines()
              if "ready to roll" not in line]
    failures = [json.loads(row)["text"].splitlines()
                for name in ("real_failures.jsonl", "alt_wordings.jsonl")
                for row in (FIXTURES / name).read_text().splitlines()]
    out: list[str] = []
    while len(out) < lines:
        out.extend(rng.choice(failures) if rng.random() < failure_share else [rng.choice(normal)])
    return out[:lines]


def bench_classifier(text_lines: list[str], sites: SiteClassifier | None = None) -> tuple[float, int]:
    classifier = LineClassifier(load_rules(), sites)
    start = time.process_time()  # CPU time: the machine may be shared; the ratios stay meaningful
    events = sum(len(classifier.feed(line)) for line in text_lines) + len(classifier.flush())
    return time.process_time() - start, events


def bench_watcher(text_lines: list[str]) -> tuple[float, int]:
    stream = "".join(line + "\n" for line in text_lines)
    watcher = LogWatcher(load_rules())
    elapsed = 0.0
    for end in range(CHUNK, len(stream) + CHUNK, CHUNK):
        buffer = stream[:end]  # everything so far, as Invoke passes it; building it is not our cost
        start = time.perf_counter()
        try:
            watcher.submit(buffer)
        except FatalLogLine:
            pass  # keep reading: we measure throughput, not the stop
        elapsed += time.perf_counter() - start
    return elapsed, len(watcher.events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000, help="lines in the synthetic log")
    parser.add_argument("--failure-share", type=float, default=0.02,
                        help="share of draws that insert a failure excerpt instead of a normal line")
    parser.add_argument("--seed", type=int, default=5, help="random seed of the mix")
    parser.add_argument("--sglang", default="0.5.23", help="the sglang release whose sites stand behind the rules")
    parser.add_argument("--flashinfer", default="0.7.2", help="the flashinfer-python release beside it")
    args = parser.parse_args()
    text_lines = corpus(args.lines, args.failure_share, args.seed)
    rules = load_rules()
    print(f"{len(text_lines)} lines, {len(rules)} rules, failure share {args.failure_share}")
    for name, fn, sample in (("LineClassifier.feed", bench_classifier, text_lines),
                             ("LogWatcher.submit", bench_watcher, text_lines[:WATCHER_LINES])):
        elapsed, events = fn(sample)
        print(f"{name:<20} {len(sample) / elapsed:>10,.0f} lines/s  "
              f"({len(sample)} lines in {elapsed:.2f} s, {events} events)")
    bench_sites(text_lines, args.sglang, args.flashinfer)


def bench_sites(text_lines: list[str], sglang: str, flashinfer: str) -> None:
    releases = [(p, v, upstream.cached(p, v)) for p, v in (("sglang", sglang), ("flashinfer-python", flashinfer))]
    if any(r is None for _, _, r in releases):
        print(f"site index: sglang {sglang} / flashinfer-python {flashinfer} not in the corpus cache (inv upstream)")
        return
    found: list[siteindex.IndexedSite] = []
    for package, version, release in releases:
        assert release is not None
        root = Path(release.root)
        cached = siteindex.cache_path(root).is_file()
        start = time.perf_counter()
        sites = siteindex.load_or_build(package, version, root)
        took = time.perf_counter() - start
        size = siteindex.cache_path(root).stat().st_size
        print(f"site index {package} {version}: {len(sites)} sites, {size / 1e6:.1f} MB, "
              f"{'loaded' if cached else 'built'} in {took:.2f} s")
        found.extend(sites)
    start = time.perf_counter()
    index = siteindex.SiteIndex(found)
    print(f"site index in memory: {len(index)} sites ({index.unindexed} too short to find) in "
          f"{time.perf_counter() - start:.2f} s")
    by_site = SiteClassifier(index)
    probes = [line for line in text_lines if ": " in line][:2000] or text_lines[:2000]
    start = time.perf_counter()
    for line in probes:
        index.locate(line)
    print(f"one lookup: {(time.perf_counter() - start) / len(probes) * 1e6:.1f} us ({len(probes)} lines)")
    live = bysite.for_release(sglang)  # what deploy's watch and inv logs use: the host's sglang release, cached
    # alternated and the fastest of REPEATS kept: on a shared machine the load moves between runs
    configs = {"rules alone": None, "with sites": by_site, **({"live follower": live} if live is not None else {})}
    best: dict[str, tuple[float, int]] = {}
    for _ in range(REPEATS):
        for name, sites in configs.items():
            elapsed, events = bench_classifier(text_lines, sites)
            if name not in best or elapsed < best[name][0]:
                best[name] = (elapsed, events)
    plain = best["rules alone"][0]
    with_sites, events = best["with sites"]
    print(f"LineClassifier.feed with sites {len(text_lines) / with_sites:>10,.0f} lines/s ({events} events); "
          f"time with sites / rules alone {with_sites / plain:.3f} (1.0: as fast; best of {REPEATS}, alternated)")
    if live is not None:
        followed, events = best["live follower"]
        print(f"live follower, sglang {sglang}'s sites {len(text_lines) / followed:>10,.0f} lines/s ({events} events); "
              f"time / rules alone {followed / plain:.3f}")

if __name__ == "__main__":
    main()
