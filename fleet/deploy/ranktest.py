"""Two samples compared by ranks (pure, standard library only): Mann-Whitney U, the Hodges-Lehmann shift and
its interval, and Kayenta's IQR outlier rule.

Samples come in strata (baseline, canary) of similar requests; every statistic is summed over the strata
(the stratified U of van Elteren with unit weights), so requests are compared only with their like.

- U counts the (baseline x, canary y) pairs of a stratum with y > x, a tie counting one half. Its null mean
  is n*m/2 and its variance n*m/12 * ((N+1) - sum(t^3 - t) / (N*(N-1))), t each tie group's size (the
  normal approximation with the tie correction, no continuity correction, as scipy's
  `mannwhitneyu(method="asymptotic", use_continuity=False)`).
- The Hodges-Lehmann shift is the median of the pairwise differences y - x (within strata); its interval is
  Lehmann's order-statistic one: the k-th smallest and k-th largest difference, k = round(P/2 - z*sqrt(V)),
  P the number of pairs, V the U variance above, z the normal quantile of the confidence (Hollander and
  Wolfe, Nonparametric Statistical Methods, 4.3).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

Stratum = tuple[Sequence[float], Sequence[float]]  # (baseline, canary)

_ENUMERATE_UP_TO = 250_000  # pairs: below this every difference is listed and sorted; above, found by bisection


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U of the canary against the baseline, summed over strata."""

    u: float  # pairs with canary > baseline (ties one half)
    mean: float  # U's mean were both the same distribution
    var: float  # its variance, tie-corrected
    z: float  # (u - mean) / sqrt(var); 0 when var is 0
    p_greater: float  # one-sided: the chance of a U this large were the canary no larger


@dataclass(frozen=True)
class Shift:
    """The Hodges-Lehmann shift (canary minus baseline) and its interval at `confidence` (two-sided)."""

    estimate: float
    low: float  # -inf when the samples are too small for the confidence
    high: float  # +inf likewise
    pairs: int
    confidence: float
    upper: float = math.inf  # the one-sided upper bound at `upper_confidence` (shift's argument), +inf as high


def _k(pairs: int, var: float, z: float) -> int:
    """The rank of the order statistic that bounds the shift at the normal quantile z (Lehmann)."""
    return round(pairs / 2 - z * math.sqrt(var))


def _midranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Each value's rank among `values` (1-based, ties given their mean rank) and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _u_var(n: int, m: int, ties: Sequence[int]) -> float:
    total = n + m
    if n == 0 or m == 0 or total < 2:
        return 0.0
    return n * m / 12 * ((total + 1) - sum(t ** 3 - t for t in ties) / (total * (total - 1)))


def mann_whitney(strata: Sequence[Stratum]) -> RankTest:
    """The stratified U of the canaries over the baselines, its normal approximation and one-sided p."""
    u = mean = var = 0.0
    for base, canary in strata:
        n, m = len(base), len(canary)
        if not n or not m:
            continue
        ranks, ties = _midranks([*base, *canary])
        u += sum(ranks[n:]) - m * (m + 1) / 2
        mean += n * m / 2
        var += _u_var(n, m, ties)
    z = (u - mean) / math.sqrt(var) if var > 0 else 0.0
    return RankTest(u, mean, var, z, 1 - NormalDist().cdf(z))


def _count_at_most(strata: Sequence[tuple[list[float], list[float]]], t: float) -> int:
    """How many pairwise differences y - x are <= t (x sorted): x >= y - t."""
    return sum(len(xs) - bisect.bisect_left(xs, y - t) for xs, ys in strata for y in ys)


RESOLUTION = 1e-9  # the bisection's: far below any shift that matters (log units: a ratio to 1e-9)


def _kth(strata: Sequence[tuple[list[float], list[float]]], k: int, lo: float, hi: float) -> float:
    """The k-th smallest difference (1-based) to within RESOLUTION, by bisection on its value:
    count(lo) < k <= count(hi)."""
    while hi - lo > RESOLUTION:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if _count_at_most(strata, mid) >= k:
            hi = mid
        else:
            lo = mid
    return hi


def _order_stats(strata: Sequence[Stratum], ks: Sequence[int]) -> list[float]:
    """The ks-th smallest (1-based) of the within-stratum differences canary - baseline."""
    pairs = sum(len(b) * len(c) for b, c in strata)
    if pairs <= _ENUMERATE_UP_TO:
        diffs = sorted(y - x for b, c in strata for x in b for y in c)
        return [diffs[k - 1] for k in ks]
    ready = [(sorted(b), list(c)) for b, c in strata if b and c]
    lo = min(min(c) - max(b) for b, c in ready) - 1.0
    hi = max(max(c) - min(b) for b, c in ready)
    return [_kth(ready, k, lo, hi) for k in ks]


def shift(strata: Sequence[Stratum], confidence: float, upper_confidence: float | None = None) -> Shift:
    """The Hodges-Lehmann shift of the canary over the baseline and its order-statistic interval; with
    `upper_confidence`, also the one-sided upper bound at that confidence (`Shift.upper`)."""
    strata = [(b, c) for b, c in strata if b and c]
    pairs = sum(len(b) * len(c) for b, c in strata)
    if not pairs:
        return Shift(0.0, -math.inf, math.inf, 0, confidence)
    var = sum(_u_var(len(b), len(c), _midranks([*b, *c])[1]) for b, c in strata)
    k = _k(pairs, var, NormalDist().inv_cdf(1 - (1 - confidence) / 2))
    ku = _k(pairs, var, NormalDist().inv_cdf(upper_confidence)) if upper_confidence is not None else 0
    mid = [(pairs + 1) // 2, pairs // 2 + 1]  # the median: one middle difference, or the mean of two
    ends = [k, pairs + 1 - k] if k >= 1 else []
    found = _order_stats(strata, [*mid, *ends, *([pairs + 1 - ku] if ku >= 1 else [])])
    low, high = (found[2], found[3]) if ends else (-math.inf, math.inf)
    upper = found[-1] if ku >= 1 else math.inf
    return Shift((found[0] + found[1]) / 2, low, high, pairs, confidence, upper)


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted `values` by linear interpolation (numpy's and Kayenta's default)."""
    if not values:
        raise ValueError("no values")
    pos = (len(values) - 1) * q
    i = math.floor(pos)
    j = min(i + 1, len(values) - 1)
    return values[i] + (values[j] - values[i]) * (pos - i)


def iqr_keep(values: Sequence[float], factor: float) -> list[float]:
    """`values` without those beyond `factor` interquartile ranges outside the quartiles (Kayenta's IQR
    outlier rule), sorted."""
    ordered = sorted(values)
    if len(ordered) < 4:
        return ordered
    q1, q3 = quantile(ordered, 0.25), quantile(ordered, 0.75)
    lo, hi = q1 - factor * (q3 - q1), q3 + factor * (q3 - q1)
    return [v for v in ordered if lo <= v <= hi]

