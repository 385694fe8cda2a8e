"""Lines per second through the log classifier, over a large synthetic mix of normal and failure lines.

    .venv/bin/python bench/bench_logwatch.py [--lines N] [--failure-share F] [--seed S]

Measures LineClassifier.feed (normalise + rules + grouping) and the LogWatcher on the same text fed as
a growing stream in 4 KiB chunks, the way Invoke hands it over. The journal-to-report delay on sandbox
hosts is a separate benchmark (it needs the sandbox).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from fleet.logs.classify import LineClassifier
from fleet.logs.rules import load_rules
from fleet.logs.watch import FatalLogLine, LogWatcher

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"
CHUNK = 4096
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


def bench_classifier(text_lines: list[str]) -> tuple[float, int]:
    classifier = LineClassifier(load_rules())
    start = time.perf_counter()
    events = sum(len(classifier.feed(line)) for line in text_lines) + len(classifier.flush())
    return time.perf_counter() - start, events


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
    args = parser.parse_args()
    text_lines = corpus(args.lines, args.failure_share, args.seed)
    rules = load_rules()
    print(f"{len(text_lines)} lines, {len(rules)} rules, failure share {args.failure_share}")
    for name, fn, sample in (("LineClassifier.feed", bench_classifier, text_lines),
                             ("LogWatcher.submit", bench_watcher, text_lines[:WATCHER_LINES])):
        elapsed, events = fn(sample)
        print(f"{name:<20} {len(sample) / elapsed:>10,.0f} lines/s  "
              f"({len(sample)} lines in {elapsed:.2f} s, {events} events)")


if __name__ == "__main__":
    main()
