"""The live follower's speed with the host's releases' sites behind the rules, against the rules alone (issue 51:
within 1.2x), the way `inv logs -f` and deploy's watch run it.

The follower: journal.follow feeding a LogWatcher built as fleet/logs/follow.stream builds it (each line split
from journalctl's time and host, events handed on, never raising), its sites bysite.for_release(sglang,
flashinfer): the host's sglang release and the flashinfer beside it, from their cached indexes. The journal is
journalctl's short-iso text of a large mix of real recorded startup lines and real failure excerpts
(tests/fixtures/logs, bench_logwatch.corpus), read as journal.Follower reads it: complete lines of at most 64 KiB a
read, each redacted. Each pair of releases is timed against the rules alone in CPU time (the machine may be shared),
alternated, the best of --repeats kept; the ratio is (time with sites) / (time with the rules alone). The one-off
cost of loading a pair's indexes when a follow starts is printed beside it.

Pairs (--pairs): `default` the newest sglang with its pin, the newest with the largest flashinfer (0.7.4, 36,800
sites: the worst case), and the oldest with its pin; `all` every sglang of playbooks/upstream/matrix.yaml with the
flashinfer its wheel pins, then with 0.7.4.

usage: .venv/bin/python bench/bench_follower.py [--lines 100000] [--repeats 5] [--pairs default|all] [--seed 5]
Needs the upstream corpus with its site indexes (`inv upstream`); reads no network.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_logwatch import corpus  # noqa: E402

from fleet.logs import bysite, follow, journal, redact  # noqa: E402
from fleet.logs.bysite import SiteClassifier  # noqa: E402
from fleet.logs.classify import Event  # noqa: E402
from fleet.logs.rules import load_rules  # noqa: E402
from fleet.logs.watch import LogWatcher  # noqa: E402
from fleet.upstream import corpus as upstream  # noqa: E402

READ = 65536  # what journal.Follower's recv takes at most
WORST_FLASHINFER = "0.7.4"


class Journal:
    """journalctl's output, read as journal.Follower reads it: complete lines, redacted, a read at a time."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def read(self, timeout: float) -> str | None:
        if self.at >= len(self.text):
            return None
        end = self.text.rfind("\n", self.at, self.at + READ) + 1 or len(self.text)
        chunk, self.at = self.text[self.at:end], end
        return "".join(redact.line(line) + "\n" for line in chunk.split("\n")[:-1])

    def close(self) -> None:
        pass


def journal_text(lines: list[str]) -> str:
    return "".join(f"2026-12-05T08:{i // 60 % 60:02d}:{i % 60:02d}+0000 gpu1 python3[4242]: {line}\n"
                   for i, line in enumerate(lines))


def run(text: str, sites: SiteClassifier | None) -> tuple[float, int]:
    """CPU seconds to follow the whole journal, and the events it found."""
    events: list[Event] = []
    watcher = LogWatcher(load_rules(), on_event=events.append, on_line=_line, raise_on_fatal=False, sites=sites)
    start = time.process_time()
    journal.follow(Journal(text), watcher, lambda: None)
    watcher.finish()
    return time.process_time() - start, len(events)


def _line(raw: str) -> str:
    """What follow.stream's line callback does before the watcher classifies: the time and host split off."""
    if follow.is_separator(raw):
        return ""
    return follow.split_time(raw)[1]


def pairs(which: str) -> list[tuple[str, str]]:
    matrix = upstream.load_matrix()
    pinned = list(matrix.sglang.items())
    if which == "all":
        return pinned + [(sg, WORST_FLASHINFER) for sg, _ in pinned]
    newest, oldest = pinned[-1], pinned[0]
    return [newest, (newest[0], WORST_FLASHINFER), oldest]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pairs", choices=("default", "all"), default="default")
    ap.add_argument("--failure-share", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    text = journal_text(corpus(args.lines, args.failure_share, args.seed))
    loaded: dict[tuple[str, str], tuple[SiteClassifier, float]] = {}
    for sg, fi in pairs(args.pairs):
        bysite.forget_releases()
        start = time.perf_counter()
        sites = bysite.for_release(sg, fi)
        if sites is None:
            print(f"sglang {sg} / flashinfer-python {fi}: no cached index (run `inv upstream`)")
            return 2
        loaded[(sg, fi)] = (sites, time.perf_counter() - start)
    print(f"{args.lines} journal lines ({len(text) / 1e6:.1f} MB, failure share {args.failure_share}), "
          f"CPU time, best of {args.repeats}, alternated with the rules alone")
    worst = 0.0
    for (sg, fi), (sites, load_s) in loaded.items():
        best: dict[str, tuple[float, int]] = {}
        for _ in range(args.repeats):
            for name, behind in (("rules", None), ("sites", sites)):
                took = run(text, behind)
                if name not in best or took[0] < best[name][0]:
                    best[name] = took
        ratio = best["sites"][0] / best["rules"][0]
        worst = max(worst, ratio)
        print(f"  sglang {sg:<13} flashinfer {fi:<13} {len(sites.index):>6} sites (loaded in {load_s:.2f} s): "
              f"rules alone {args.lines / best['rules'][0]:>8,.0f} lines/s ({best['rules'][1]} events), with sites "
              f"{args.lines / best['sites'][0]:>8,.0f} lines/s ({best['sites'][1]} events): {ratio:.3f}x")
    print(f"worst: {worst:.3f}x the rules alone (the issue's goal: within 1.2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
