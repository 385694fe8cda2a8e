"""A canary judged against its baseline on the same traffic, as Kayenta judges one (pure: no I/O, no clock).

Each side's requests are `Sample`s. Per latency metric (TTFT, TPOT, end-to-end), on log values so a shift is
a ratio:
- location: requests compared only within strata of similar prompt and output length (each length cut at the
  pooled requests' quantiles, or at each of its values when it has no more of them than bins), Kayenta's IQR
  outliers removed per side and stratum, the stratified Mann-Whitney U and the Hodges-Lehmann shift with its
  interval (fleet.deploy.ranktest);
- tail: each request against its stratum's pooled median, then the requests of both sides above the pooled
  `tail` quantile of that, by the same test and shift (the cut depends on the pooled requests alone, so the
  test stays valid; a release slower only above p99 shows its whole shift there).
Errors: the canary's error rate minus the baseline's, with the Agresti-Caffo interval.

Direction-aware: only worse fails. A metric FAILs when the canary is worse with the look's confidence and its
estimate reaches the effect that matters; it PASSes early when its one-sided upper bound at `pass_confidence`
stays below that effect (an equivalence stop: a part truly worse by that effect passes early at most
`pass_risk` of the time, over all looks); else it is INCONCLUSIVE and the window extends by `window` seconds.
At the cap (`max_window`) a metric not shown worse passes (Kayenta's rule: no regression that matters was
shown in the whole window), unless it had too few requests to be judged at all (no bounded interval, under
`min_stratum` requests a side in the tail): that leaves the verdict Inconclusive, which never promotes. The
verdict fails on any failed metric and passes when all pass. Every look and part spends an equal share of
1 - confidence (Bonferroni) on the lower end of its interval, the one that fails, so looking early and judging
seven parts cost an identical release no false aborts beyond the stated rate.

`sequential` replays the rule over recorded samples (each has its time in the window), offline.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist
from typing import Any

from fleet.deploy import ranktest
from fleet.policy import Canary


class Metric(StrEnum):
    TTFT = "ttft"
    TPOT = "tpot"
    E2E = "e2e"
    ERRORS = "errors"


class Decision(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Sample:
    """One request as a client saw it: lengths in tokens, times in seconds; a failed one has no times."""

    at: float  # when it ended, seconds into the window
    prompt_tokens: int
    output_tokens: int
    ttft: float | None = None
    e2e: float | None = None

    @property
    def ok(self) -> bool:
        return self.ttft is not None and self.e2e is not None

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.e2e is None or self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)

    def value(self, metric: Metric) -> float | None:
        return {Metric.TTFT: self.ttft, Metric.TPOT: self.tpot, Metric.E2E: self.e2e}.get(metric)

    def to_json(self) -> list[object]:
        return [self.at, self.prompt_tokens, self.output_tokens, self.ttft, self.e2e]

    @classmethod
    def from_json(cls, data: object) -> Sample:
        if not isinstance(data, list) or len(data) != 5:
            raise ValueError("a sample is [at, prompt_tokens, output_tokens, ttft, e2e]")
        at, p, o, ttft, e2e = data
        if type(p) is not int or type(o) is not int or p < 0 or o < 0:
            raise ValueError("a sample's token counts are whole numbers")
        return cls(_num(at), p, o, None if ttft is None else _num(ttft), None if e2e is None else _num(e2e))


def _num(v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"not a finite number: {str(v)[:40]!r}")
    return float(v)


@dataclass(frozen=True)
class MetricVerdict:
    """One metric's part judged: its estimate of how much worse the canary is (a fraction for times: 0.10 =
    10% slower; a difference of rates for errors) and the interval, the samples on each side, the decision."""

    metric: Metric
    part: str  # "location", "p99" (the tail) or "rate"
    decision: Decision
    estimate: float
    low: float
    high: float
    p: float  # one-sided: the chance of a canary this much worse were it no worse
    n_base: int
    n_canary: int
    limit: float  # the effect that matters

    def to_json(self) -> dict[str, object]:
        return {"metric": self.metric.value, "part": self.part, "decision": self.decision.value,
                "estimate": self.estimate, "low": _finite(self.low), "high": _finite(self.high), "p": self.p,
                "n_base": self.n_base, "n_canary": self.n_canary, "limit": self.limit}

    @classmethod
    def from_json(cls, d: Any) -> MetricVerdict:
        if not isinstance(d["part"], str) or not _PART.fullmatch(d["part"]):
            raise ValueError(f"no part of a metric: {str(d['part'])[:40]!r}")
        return cls(Metric(d["metric"]), d["part"], Decision(d["decision"]), _num(d["estimate"]),
                   _inf(d["low"], -1), _inf(d["high"], 1), _num(d["p"]), _count(d["n_base"]), _count(d["n_canary"]),
                   _num(d["limit"]))


_PART = re.compile(r"location|rate|p\d{1,2}(\.\d{1,4})?")


def _count(v: object) -> int:
    if type(v) is not int or v < 0:
        raise ValueError(f"not a count: {str(v)[:40]!r}")
    return v


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None  # JSON has no infinity: None is "unbounded"


def _inf(v: object, sign: int) -> float:
    return sign * math.inf if v is None else _num(v)


@dataclass(frozen=True)
class Verdict:
    """The judge's verdict at one look: what was decided, whether the window ends here, every metric's part."""

    decision: Decision
    final: bool  # a clear verdict, or the cap reached
    seconds: float  # the window judged so far
    look: int  # 1-based
    metrics: tuple[MetricVerdict, ...]
    strata: int  # strata compared
    dropped: int  # requests of strata too thin to compare (both sides)

    @property
    def promotes(self) -> bool:
        return self.decision == Decision.PASS

    def reasons(self) -> list[str]:
        """One line per part that did not pass."""
        return [f"{m.metric} {m.part} {m.decision}: {_show(m)}" for m in self.metrics if m.decision != Decision.PASS]

    def summary(self) -> str:
        """The decision and its first part that did not pass, e.g. `fail: ttft p99 +10.8%` (history's cell)."""
        worst = next((m for m in self.metrics if m.decision == self.decision), None)
        if self.decision == Decision.PASS or worst is None:
            return f"{self.decision} ({self.seconds:g} s)"
        size = f"{worst.estimate * 100:+.2f} pts" if worst.metric == Metric.ERRORS else f"{worst.estimate * 100:+.1f}%"
        return f"{self.decision}: {worst.metric} {worst.part} {size}"

    def to_json(self) -> dict[str, object]:
        return {"decision": self.decision.value, "final": self.final, "seconds": self.seconds, "look": self.look,
                "strata": self.strata, "dropped": self.dropped, "metrics": [m.to_json() for m in self.metrics]}

    @classmethod
    def from_json(cls, d: Any) -> Verdict:
        """A recorded verdict (ValueError when it is not one)."""
        try:
            return cls(Decision(d["decision"]), d["final"] is True, _num(d["seconds"]), _count(d["look"]),
                       tuple(MetricVerdict.from_json(m) for m in d["metrics"]), _count(d["strata"]),
                       _count(d["dropped"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a canary verdict: {exc}") from None


def _show(m: MetricVerdict) -> str:
    if m.metric == Metric.ERRORS:
        return (f"error rate {m.estimate * 100:+.2f} points [{m.low * 100:+.2f}, {m.high * 100:+.2f}], "
                f"limit {m.limit * 100:g} (n {m.n_base}/{m.n_canary})")
    lo = "-inf" if not math.isfinite(m.low) else f"{m.low * 100:+.1f}%"
    hi = "+inf" if not math.isfinite(m.high) else f"{m.high * 100:+.1f}%"
    return f"{m.estimate * 100:+.1f}% [{lo}, {hi}], limit {m.limit * 100:g}% (n {m.n_base}/{m.n_canary})"


LATENCIES = (Metric.TTFT, Metric.TPOT, Metric.E2E)
PARTS = 1 + 2 * len(LATENCIES)  # errors, and each latency's location and tail


def look_confidence(policy: Canary) -> float:
    """Each part's interval at each look, two-sided: 1 - confidence shared equally by every look and part
    (Bonferroni) and spent on one side, its lower end (only worse fails), so an identical release fails at most
    1 - confidence of the time, all told. (Spending each share on both ends, as before, held the false-abort
    rate to half the stated one and cost the tail's detection: bench/bench_canary_judge.py.)"""
    return 1 - 2 * (1 - policy.confidence) / (policy.looks * PARTS)


def _edges(values: Sequence[int], bins: int) -> list[float]:
    """Where a length's bins are cut (a value above an edge is in a later bin): at the pooled quantiles, or at
    each distinct value when there are no more of them than bins. A quantile of a few distinct lengths lands on
    one of them by chance and puts two lengths in one bin (5 lengths, 5 bins: 9 to 25 strata, not 25), and a
    stratum of two prompt lengths mixes their TTFTs: the tail then measures the mix, not the release."""
    ordered = sorted(values)
    distinct = sorted(set(ordered))
    if len(distinct) <= bins:
        return [float(v) for v in distinct[:-1]]
    return sorted({ranktest.quantile(ordered, i / bins) for i in range(1, bins)})


def _bin(v: int, edges: Sequence[float]) -> int:
    return sum(1 for e in edges if v > e)


def strata_of(base: Sequence[Sample], canary: Sequence[Sample], bins: int) -> dict[tuple[int, int], tuple[
        list[Sample], list[Sample]]]:
    """The requests of both sides in strata of similar prompt and output length (cut at pooled quantiles)."""
    pooled = [*base, *canary]
    pe = _edges([s.prompt_tokens for s in pooled], bins)
    oe = _edges([s.output_tokens for s in pooled], bins)
    out: dict[tuple[int, int], tuple[list[Sample], list[Sample]]] = {}
    for side, samples in ((0, base), (1, canary)):
        for s in samples:
            out.setdefault((_bin(s.prompt_tokens, pe), _bin(s.output_tokens, oe)), ([], []))[side].append(s)
    return out


def _logs(samples: Sequence[Sample], metric: Metric) -> list[float]:
    return [math.log(v) for s in samples if (v := s.value(metric)) is not None and v > 0]


def pass_confidence(policy: Canary) -> float:
    """The one-sided confidence of the upper bound that passes a part early: `pass_risk` shared equally by the
    looks (Bonferroni), so a part truly worse by its effect that matters passes before the cap at most
    `pass_risk` of the time. Not shared by the parts: a release passes early only when every part does, so
    its one worse part alone has to err."""
    return 1 - policy.pass_risk / policy.looks


def _decide(estimate: float, worse: bool, upper: float, limit: float, last: bool) -> Decision:
    """FAIL: shown worse (`worse`, at the look's confidence) by at least `limit`; PASS: the upper bound at
    `pass_confidence` rules `limit` out (an early pass), or it is the last look (nothing that matters was
    shown); else INCONCLUSIVE (extend)."""
    if worse and estimate >= limit:
        return Decision.FAIL
    if upper < limit or last:
        return Decision.PASS
    return Decision.INCONCLUSIVE


def location(metric: Metric, strata: Sequence[tuple[Sequence[Sample], Sequence[Sample]]], policy: Canary,
             confidence: float, last: bool = False) -> MetricVerdict:
    """A latency's location within strata: IQR outliers out per side, then U and the Hodges-Lehmann shift."""
    pairs = [(ranktest.iqr_keep(_logs(b, metric), policy.iqr_factor),
              ranktest.iqr_keep(_logs(c, metric), policy.iqr_factor)) for b, c in strata]
    pairs = [(b, c) for b, c in pairs if len(b) >= policy.min_stratum and len(c) >= policy.min_stratum]
    test = ranktest.mann_whitney(pairs)
    sh = ranktest.shift(pairs, confidence, pass_confidence(policy))
    est, low, high = math.expm1(sh.estimate), math.expm1(sh.low), math.expm1(sh.high)
    bounded = math.isfinite(sh.low) and math.isfinite(sh.high)  # else too few requests for the confidence
    decision = _decide(est, low > 0, math.expm1(sh.upper), policy.min_effect, last) if bounded \
        else Decision.INCONCLUSIVE
    return MetricVerdict(metric, "location", decision, est, low, high, test.p_greater,
                         sum(len(b) for b, _ in pairs), sum(len(c) for _, c in pairs), policy.min_effect)


def _residuals(strata: Sequence[tuple[Sequence[Sample], Sequence[Sample]]], metric: Metric) -> tuple[
        list[float], list[float]]:
    """Each side's log values less their stratum's pooled median: how slow a request was for its kind."""
    base: list[float] = []
    canary: list[float] = []
    for b, c in strata:
        lb, lc = _logs(b, metric), _logs(c, metric)
        if lb and lc:
            mid = ranktest.quantile(sorted([*lb, *lc]), 0.5)
            base += [v - mid for v in lb]
            canary += [v - mid for v in lc]
    return base, canary


def tail(metric: Metric, strata: Sequence[tuple[Sequence[Sample], Sequence[Sample]]], policy: Canary,
         confidence: float, last: bool = False) -> MetricVerdict:
    """A latency's tail: each request measured against its stratum's pooled median, then the requests of both
    sides above the pooled `tail` quantile of that, compared by the same rank test and shift. The cut depends on
    the pooled requests alone, so were both sides alike the labels above it would be a random draw: the test
    stays valid, and a release slower only there shows its whole shift. A canary with too few requests above
    the cut where the baseline has them passes at the cap (not shown slower there); before it, the window
    extends: a few requests above the cut fall to one side by chance, a slower canary's too, and such a pass
    had no bound on its risk (a release 10% slower from p99 passed at the first look 3 times in 172 seeds)."""
    b, c = _residuals(strata, metric)
    part = f"p{policy.tail * 100:g}"
    cut = ranktest.quantile(sorted([*b, *c]), policy.tail) if b and c else math.inf
    above = ([v for v in b if v > cut], [v for v in c if v > cut])
    nb, nc = len(above[0]), len(above[1])
    if min(nb, nc) < policy.min_stratum:
        faster = last and nc < policy.min_stratum <= nb and nb + nc >= 2 * policy.min_stratum
        return MetricVerdict(metric, part, Decision.PASS if faster else Decision.INCONCLUSIVE, 0.0, -math.inf,
                             math.inf, 1.0, nb, nc, policy.tail_min_effect)
    test = ranktest.mann_whitney([above])
    sh = ranktest.shift([above], confidence, pass_confidence(policy))
    est, low, high = math.expm1(sh.estimate), math.expm1(sh.low), math.expm1(sh.high)
    bounded = math.isfinite(sh.low) and math.isfinite(sh.high)
    decision = _decide(est, low > 0, math.expm1(sh.upper), policy.tail_min_effect, last) if bounded \
        else Decision.INCONCLUSIVE
    return MetricVerdict(metric, part, decision, est, low, high, test.p_greater, nb, nc, policy.tail_min_effect)


def errors(base: Sequence[Sample], canary: Sequence[Sample], policy: Canary, confidence: float,
           last: bool = False) -> MetricVerdict:
    """The canary's error rate minus the baseline's, with the Agresti-Caffo interval (one success and one
    failure added to each side)."""
    nb, nc = len(base), len(canary)
    eb, ec = sum(not s.ok for s in base), sum(not s.ok for s in canary)
    if not nb or not nc:
        return MetricVerdict(Metric.ERRORS, "rate", Decision.INCONCLUSIVE, 0.0, -1.0, 1.0, 1.0, nb, nc,
                             policy.max_error_increase)
    est = ec / nc - eb / nb
    pb, pc = (eb + 1) / (nb + 2), (ec + 1) / (nc + 2)
    se = math.sqrt(pb * (1 - pb) / (nb + 2) + pc * (1 - pc) / (nc + 2))
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    mid = pc - pb
    p = 1 - NormalDist().cdf(mid / se)
    limit = policy.max_error_increase
    upper = mid + NormalDist().inv_cdf(pass_confidence(policy)) * se
    decision = _decide(est, mid - z * se > 0, upper, limit, last)
    return MetricVerdict(Metric.ERRORS, "rate", decision, est, mid - z * se, mid + z * se, p, nb, nc, limit)


def judge(base: Sequence[Sample], canary: Sequence[Sample], policy: Canary, seconds: float) -> Verdict:
    """The verdict after `seconds` of the window on these samples (every look judges all so far)."""
    look = max(1, min(policy.looks, math.ceil(seconds / policy.window - 1e-9)))
    confidence = look_confidence(policy)
    groups = strata_of(base, canary, policy.length_bins)
    thick = [g for g in groups.values() if len(g[0]) >= policy.min_stratum and len(g[1]) >= policy.min_stratum]
    dropped = sum(len(b) + len(c) for b, c in groups.values()) - sum(len(b) + len(c) for b, c in thick)
    ok_strata = [([s for s in b if s.ok], [s for s in c if s.ok]) for b, c in thick]
    last = seconds >= policy.max_window - 1e-9
    parts = [errors(base, canary, policy, confidence, last)]
    for metric in LATENCIES:
        parts.append(location(metric, ok_strata, policy, confidence, last))
        parts.append(tail(metric, ok_strata, policy, confidence, last))
    decisions = {m.decision for m in parts}
    decision = Decision.FAIL if Decision.FAIL in decisions else \
        Decision.PASS if decisions == {Decision.PASS} else Decision.INCONCLUSIVE
    final = decision != Decision.INCONCLUSIVE or last
    return Verdict(decision, final, seconds, look, tuple(parts), len(thick), dropped)


def sequential(base: Sequence[Sample], canary: Sequence[Sample], policy: Canary) -> Verdict:
    """The sequential rule over recorded samples: a look every `window` seconds on the samples ended by then,
    the first final verdict kept (the cap's Inconclusive at the latest)."""
    verdict = None
    for look in range(1, policy.looks + 1):
        t = min(look * policy.window, policy.max_window)
        verdict = judge([s for s in base if s.at <= t], [s for s in canary if s.at <= t], policy, t)
        if verdict.final:
            return verdict
    assert verdict is not None  # looks >= 1
    return verdict


@dataclass(frozen=True)
class Recorded:
    """What a canary's window recorded: the policy it was judged by, both sides' samples and the verdict, so it
    can be judged again offline (`replay`)."""

    policy: Canary
    base: tuple[Sample, ...]
    canary: tuple[Sample, ...]
    verdict: Verdict

    def to_json(self) -> dict[str, object]:
        return {"policy": self.policy.model_dump(), "verdict": self.verdict.to_json(),
                "base": [s.to_json() for s in self.base], "canary": [s.to_json() for s in self.canary]}

    @classmethod
    def from_json(cls, d: Any) -> Recorded:
        """A recording as to_json wrote it (ValueError naming what is wrong)."""
        if not isinstance(d, dict):
            raise ValueError("a canary recording is a JSON object")
        try:
            policy = Canary.model_validate(_before_pass_risk(d["policy"]))
            base = tuple(Sample.from_json(s) for s in d["base"])
            canary = tuple(Sample.from_json(s) for s in d["canary"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a canary recording: {exc}") from None
        return cls(policy, base, canary, Verdict.from_json(d.get("verdict")))


def _before_pass_risk(policy: Any) -> Any:
    """A policy recorded before `pass_risk`: its early pass was the upper end of the look's interval, one-sided
    at 1 - (1 - confidence) / (looks * PARTS), which is `pass_risk` (1 - confidence) / PARTS."""
    if not isinstance(policy, dict) or "pass_risk" in policy:
        return policy
    confidence = policy.get("confidence", Canary().confidence)
    return {**policy, "pass_risk": (1 - confidence) / PARTS} if isinstance(confidence, float) else policy


def replay(recorded: Recorded, policy: Canary | None = None) -> Verdict:
    """The recorded samples judged again, by the recorded policy or another."""
    return sequential(recorded.base, recorded.canary, policy or recorded.policy)
