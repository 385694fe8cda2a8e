"""The highest request rate a running server keeps under an SLO (pure: the caller measures each point).

Latency grows with the request rate, so passing is taken as monotone: double from the start rate until a point
fails (or the ceiling passes), then bisect geometrically between the highest pass and the lowest fail until they
are within `rel_tol` or the probes run out. The answer is isotonic over every point measured: the highest
passing rate below every failing one, so a lucky pass above a failure never counts. The server is not
restarted between points; only the load changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.deploy.slo import Metric, Verdict


@dataclass(frozen=True, slots=True)
class Point:
    rate: float  # requests per second offered
    verdict: Verdict

    @property
    def passed(self) -> bool:
        return self.verdict.passed


@dataclass(frozen=True, slots=True)
class LoadSearch:
    points: tuple[Point, ...]  # in the order measured

    @property
    def highest(self) -> float | None:
        """The highest rate kept under the SLO with no failing rate at or below it (None: none kept)."""
        return highest_kept(self.points)

    @property
    def lowest_failing(self) -> float | None:
        fails = [p.rate for p in self.points if not p.passed]
        return min(fails) if fails else None


def highest_kept(points: Sequence[Point]) -> float | None:
    floor_fail = min((p.rate for p in points if not p.passed), default=math.inf)
    kept = [p.rate for p in points if p.passed and p.rate < floor_fail]
    return max(kept) if kept else None


def search(measure: Callable[[float], Verdict], start: float, ceiling: float,
           rel_tol: float = 0.05, max_points: int = 12) -> LoadSearch:
    """Points measured at rates between start / 2**k and `ceiling` until the boundary is within `rel_tol`."""
    if not 0 < start <= ceiling:
        raise ValueError(f"load search: need 0 < start <= ceiling, got {start}, {ceiling}")
    points: list[Point] = []

    def probe(rate: float) -> bool:
        points.append(Point(rate, measure(rate)))
        return points[-1].passed

    rate = start
    if probe(rate):  # up until a failure
        while rate < ceiling and len(points) < max_points:
            rate = min(rate * 2, ceiling)
            if not probe(rate):
                break
    else:  # down until a pass
        while len(points) < max_points and rate > start / 64:
            rate /= 2
            if probe(rate):
                break
    while len(points) < max_points:
        lo, hi = highest_kept(points), LoadSearch(tuple(points)).lowest_failing
        if lo is None or hi is None or hi / lo <= 1 + rel_tol:
            break
        probe(math.sqrt(lo * hi))
    return LoadSearch(tuple(points))


def samples_of(record: Mapping[str, Any]) -> dict[Metric, list[float]]:
    """Per-request TTFT, TPOT and end-to-end seconds from bench_serving's `--output-details` JSON line
    (`ttfts`; `itls`: the gaps between a request's streamed chunks, several tokens each; `output_lens`: its tokens,
    so TPOT is the time after the first token over the tokens after it, as bench_serving computes it; a request
    that failed has no TTFT and is left out)."""
    ttfts = record.get("ttfts") or []
    itls = record.get("itls") or []
    lens = record.get("output_lens") or [None] * len(ttfts)
    errors = record.get("errors") or [""] * len(ttfts)
    out: dict[Metric, list[float]] = {Metric.TTFT: [], Metric.TPOT: [], Metric.E2E: []}
    for ttft, gaps, n, error in zip(ttfts, itls, lens, errors, strict=False):
        if error or not isinstance(ttft, (int, float)) or ttft <= 0:
            continue
        after = sum(float(g) for g in gaps or [])
        out[Metric.TTFT].append(float(ttft))
        out[Metric.E2E].append(float(ttft) + after)
        if isinstance(n, int) and n > 1:
            out[Metric.TPOT].append(after / (n - 1))
    return out


@dataclass(frozen=True, slots=True)
class Speed:
    """What one load point served, for the Pareto front: all users' output tokens a second, and one user's."""

    tok_s: float  # output tokens per second over the point (bench_serving's output_throughput)
    tok_s_per_user: float  # a streaming request's tokens per second after its first: 1000 / median_tpot_ms


def speed_of(record: Mapping[str, Any]) -> Speed | None:
    """bench_serving's `output_throughput` and `median_tpot_ms` (sglang 0.5.9 bench_serving.py writes both into
    its result line, lines 2694 and 2706); None when either is missing or not above 0."""
    tok_s, tpot_ms = record.get("output_throughput"), record.get("median_tpot_ms")
    if not isinstance(tok_s, (int, float)) or not isinstance(tpot_ms, (int, float)) or tok_s <= 0 or tpot_ms <= 0:
        return None
    return Speed(float(tok_s), 1000.0 / float(tpot_ms))


LAGGED = 0.8  # a client that sent below this share of the asked rate did not offer it


def client_lag(record: Mapping[str, Any], rate: float) -> str | None:
    """Why a load point says nothing about `rate` (None: it may): the client sent its requests slower than asked (a
    busy host's CPU), so the server was offered less. bench_serving's `duration` (sglang 0.5.9 bench_serving.py
    line 2685) ends with the last answer: the last request was sent at most `duration - max(e2e)` after the start,
    so (requests - 1) over that is the most the client can have sent at. A request that failed is not counted."""
    samples = samples_of(record)[Metric.E2E]
    duration = record.get("duration")
    if not math.isfinite(rate) or rate <= 0 or len(samples) < 2 or not isinstance(duration, (int, float)):
        return None
    span = float(duration) - max(samples)
    if span <= 0:
        return None  # every answer took as long as the point: when each was sent cannot be told
    sent = (len(samples) - 1) / span
    if sent >= LAGGED * rate:
        return None
    return f"the client sent at most {sent:.3g} req/s of the {rate:.3g} asked (a busy host?): the point says nothing"
