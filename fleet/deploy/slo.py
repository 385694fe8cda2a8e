"""A latency promise (`--slo ttft_p99=2s,tpot_p99=60ms`) and whether one load point keeps it (pure).

A point keeps it only when, for every target, the upper bound of a bootstrap interval of the quantile is under
the limit: with 1,000 requests a p99 rests on about 10 of them, so the point estimate alone passes by luck
(NVIDIA AIPerf reports about +-10% for a p99 of 1,000 requests). Too few requests never pass.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from fleet.errors import InputError

DEFAULT_REQUESTS = 1000
DEFAULT_RESAMPLES = 1000
LEVEL = 0.95  # two-sided: the upper bound is the 97.5th percentile of the resampled quantiles


class Metric(StrEnum):
    TTFT = "ttft"  # time to first token
    TPOT = "tpot"  # time per output token after the first
    E2E = "e2e"  # the whole request


@dataclass(frozen=True, slots=True)
class Target:
    metric: Metric
    quantile: float  # 0.99 for p99
    limit_s: float

    def __str__(self) -> str:
        return f"{self.metric}_p{_pct(self.quantile)}<{_duration(self.limit_s)}"


@dataclass(frozen=True, slots=True)
class Slo:
    targets: tuple[Target, ...]


_ITEM = re.compile(r"(ttft|tpot|e2e)_p(\d{1,2}(?:\.\d+)?)=(\d+(?:\.\d+)?)(ms|s)")


def parse(text: str) -> Slo:
    """`ttft_p99=2s,tpot_p99=60ms` (metrics ttft, tpot, e2e; a percentile above 0 and below 100; ms or s)."""
    targets: list[Target] = []
    for item in (p.strip() for p in text.split(",")):
        m = _ITEM.fullmatch(item)
        if m is None:
            raise InputError(f"--slo: {item!r} is not METRIC_pNN=DURATION (e.g. ttft_p99=2s,tpot_p99=60ms; "
                             "metrics ttft, tpot, e2e; units ms or s)")
        pct, value = float(m.group(2)), float(m.group(3))
        if not 0 < pct < 100 or value <= 0:
            raise InputError(f"--slo: {item!r}: the percentile must be above 0 and below 100, the limit above 0")
        metric = Metric(m.group(1))
        q = round(pct / 100, 9)
        if any(t.metric is metric and t.quantile == q for t in targets):
            raise InputError(f"--slo: {item!r} is given twice")
        targets.append(Target(metric, q, value / 1000 if m.group(4) == "ms" else value))
    return Slo(tuple(targets))


def quantile(samples: Sequence[float], q: float) -> float:
    """The q-quantile, linear between order statistics (numpy's default)."""
    ordered = sorted(samples)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    estimate: float
    high: float


def bootstrap(samples: Sequence[float], q: float, rng: random.Random,
              resamples: int = DEFAULT_RESAMPLES, level: float = LEVEL) -> Interval:
    """Percentile-bootstrap interval of the q-quantile."""
    n = len(samples)
    stats = sorted(quantile(rng.choices(samples, k=n), q) for _ in range(resamples))
    tail = (1 - level) / 2
    return Interval(quantile(stats, tail), quantile(samples, q), quantile(stats, 1 - tail))


@dataclass(frozen=True, slots=True)
class Check:
    target: Target
    interval: Interval
    passed: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    """One load point against the SLO."""

    requests: int
    checks: tuple[Check, ...]
    enough: bool  # at least the required number of requests finished

    @property
    def passed(self) -> bool:
        return self.enough and all(c.passed for c in self.checks)


def seeded(samples: Mapping[Metric, Sequence[float]]) -> random.Random:
    """A generator seeded by the samples themselves: the same measurements always get the same verdict (a point
    near its limit is not passed on one run and failed on a replay by the bootstrap's luck)."""
    digest = hashlib.sha256()
    for metric in sorted(samples):
        digest.update(f"{metric}:{list(samples[metric])!r};".encode())
    return random.Random(digest.digest())


def judge(samples: Mapping[Metric, Sequence[float]], slo: Slo, rng: random.Random,
          min_requests: int = DEFAULT_REQUESTS, resamples: int = DEFAULT_RESAMPLES) -> Verdict:
    """Every target's interval; the point passes when each upper bound is under its limit and enough ran."""
    checks = []
    counts = []
    for t in slo.targets:
        values = samples.get(t.metric, ())
        counts.append(len(values))
        if not values:
            checks.append(Check(t, Interval(math.inf, math.inf, math.inf), False))
            continue
        iv = bootstrap(values, t.quantile, rng, resamples)
        checks.append(Check(t, iv, iv.high < t.limit_s))
    n = min(counts, default=0)
    return Verdict(n, tuple(checks), n >= min_requests)


def _pct(q: float) -> str:
    return f"{q * 100:g}"


def _duration(seconds: float) -> str:
    return f"{seconds:g}s" if seconds >= 1 else f"{seconds * 1000:g}ms"
