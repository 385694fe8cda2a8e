"""Two configurations compared by interleaved replicates: which keeps more requests per second within the SLO,
or equal within noise (pure).

Each replicate is one start of the server and the request rate it kept. The starts alternate in ABBA blocks
(A B B A A B ...), so a drift of the host (clocks, heat, a neighbour) falls on both alike, and the i-th A pairs
with the i-th B. The comparison is on each pair's log ratio ln(B/A) (rates are positive, a ratio is what an
operator reads): the mean of the n log ratios and its Student-t interval (n - 1 degrees of freedom, 95%
two-sided).

A winner only when the whole interval lies beyond a margin of practical equivalence, MARGIN (1%): B is named
only when shown at least 1% faster than A, and A only when shown at least 1% faster than B; otherwise the two are
equal within noise (inv tune --slo then keeps the best full result). An interval that
merely excludes 1 names a winner on two identical configurations in exactly 5% of comparisons (the t interval's
own error rate: bench/bench_tune_search.py measured 5.1% of 4,000, 95% interval 4.5-5.9%); with the margin the
rate is below 5% at every noise level (at most 5%, reached only as the noise grows without bound), and a gain
too small to be worth a configuration change is never one. The bench measures both the false winners and the
power on true differences of 5% and 10% (figures in its docstring).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist

# Student t's 97.5th percentile for 1..30 degrees of freedom (any table of the t distribution; scipy's
# t.ppf(0.975, df) to the digits shown); beyond 30, the Cornish-Fisher expansion below is within 0.001.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


MARGIN = 0.01  # a winner is shown at least this much faster (a fraction of the other's rate)
PAIRS = 3  # interleaved pairs by default (inv tune --slo --pairs)


class Side(StrEnum):
    A = "a"
    B = "b"


def order(pairs: int) -> list[Side]:
    """The order of 2 * `pairs` starts, in ABBA blocks."""
    out: list[Side] = []
    for i in range(pairs):
        out += [Side.A, Side.B] if i % 2 == 0 else [Side.B, Side.A]
    return out


def t975(df: int) -> float:
    """Student t's 97.5th percentile with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"t quantile: need at least one degree of freedom, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = NormalDist().inv_cdf(0.975)
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


@dataclass(frozen=True, slots=True)
class Comparison:
    pairs: int
    ratio: float  # B over A: the geometric mean of the pairs' ratios
    low: float  # the ratio's 95% interval
    high: float
    winner: Side | None  # None: equal within noise (or too few pairs to say)
    margin: float = MARGIN

    def says(self, a: str, b: str) -> str:
        """One line for the operator."""
        span = f"B/A {self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}] over {self.pairs} interleaved pairs"
        if self.winner is None:
            return (f"{a} and {b} are equal within noise ({span}; a winner needs the interval beyond "
                    f"{self.margin:.0%} either way)")
        won, lost = (b, a) if self.winner is Side.B else (a, b)
        return f"{won} beats {lost} ({span})"


def compare(a: Sequence[float], b: Sequence[float], margin: float = MARGIN) -> Comparison:
    """A's and B's kept rates, replicate i of each from the same ABBA block; both positive. B wins when the
    interval's low end is above 1 + margin, A when its high end is below 1 / (1 + margin)."""
    if len(a) != len(b):
        raise ValueError(f"replicates: {len(a)} of A against {len(b)} of B; they come in pairs")
    if any(not v > 0 for v in (*a, *b)):
        raise ValueError("replicates: every kept rate must be above 0")
    logs = [math.log(y / x) for x, y in zip(a, b, strict=True)]
    n = len(logs)
    if not 0 <= margin < 1:
        raise ValueError(f"replicates: a margin from 0 to 1, got {margin}")
    if n < 2:
        ratio = math.exp(logs[0]) if logs else 1.0
        return Comparison(n, ratio, 0.0, math.inf, None, margin)
    mean = statistics.fmean(logs)
    half = t975(n - 1) * statistics.stdev(logs) / math.sqrt(n)
    low, high, beyond = mean - half, mean + half, math.log1p(margin)
    winner = Side.B if low > beyond else Side.A if high < -beyond else None
    return Comparison(n, math.exp(mean), math.exp(low), math.exp(high), winner, margin)
