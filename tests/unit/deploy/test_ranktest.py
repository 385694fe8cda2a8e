"""fleet.deploy.ranktest: Mann-Whitney U, the Hodges-Lehmann shift and its interval, the IQR rule, against known
values (R's documented example, scipy 1.17.1's mannwhitneyu, Kayenta's own detector test) and known
distributions (the interval's coverage over many seeds)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from fleet.deploy import ranktest

# R's ?wilcox.test two-sample example (permeability constants): W = 35 for x against y
R_X = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]
R_Y = [1.15, 0.88, 0.90, 0.74, 1.21]


def test_u_is_rs_w_for_its_documented_example():
    # canary x over baseline y: R prints W = 35
    test = ranktest.mann_whitney([(R_Y, R_X)])
    assert test.u == 35
    assert test.mean == 25


def test_p_is_scipys_asymptotic_p_without_continuity():
    # scipy 1.17.1: mannwhitneyu(R_X, R_Y, alternative="greater", method="asymptotic", use_continuity=False)
    test = ranktest.mann_whitney([(R_Y, R_X)])
    assert test.p_greater == pytest.approx(SCIPY_R_P, rel=1e-9)


def test_ties_take_the_tie_corrected_variance():
    base = [1, 2, 2, 3, 3, 3, 4, 5, 5, 6]
    canary = [2, 3, 3, 4, 5, 5, 5, 6, 7, 7, 8]
    # scipy 1.17.1: mannwhitneyu(canary, base, alternative="greater", method="asymptotic", use_continuity=False)
    test = ranktest.mann_whitney([(base, canary)])
    assert test.u == SCIPY_TIES_U
    assert test.p_greater == pytest.approx(SCIPY_TIES_P, rel=1e-9)


def test_strata_sum_their_u_and_variances():
    a, b = ([1.0, 2.0, 3.0], [2.5, 3.5]), ([10.0, 11.0], [9.0, 12.0, 13.0])
    one, two, both = ranktest.mann_whitney([a]), ranktest.mann_whitney([b]), ranktest.mann_whitney([a, b])
    assert both.u == one.u + two.u and both.var == pytest.approx(one.var + two.var)
    assert both.z == pytest.approx((both.u - both.mean) / math.sqrt(both.var))


def brute_shift(strata, confidence):
    """The definition, written out: every within-stratum difference sorted; the interval's k from U's variance."""
    diffs = sorted(y - x for b, c in strata for x in b for y in c)
    pairs = len(diffs)
    var = sum(ranktest.mann_whitney([(b, c)]).var for b, c in strata)
    z = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    k = round(pairs / 2 - z * math.sqrt(var))
    return statistics.median(diffs), diffs[k - 1], diffs[pairs - k]


def test_shift_is_the_median_difference_and_its_order_statistic_interval():
    rng = random.Random(7)
    strata = [([rng.gauss(0, 1) for _ in range(30)], [rng.gauss(0.4, 1) for _ in range(25)]),
              ([rng.gauss(3, 1) for _ in range(12)], [rng.gauss(3.4, 1) for _ in range(17)])]
    got = ranktest.shift(strata, 0.95)
    assert (got.estimate, got.low, got.high) == pytest.approx(brute_shift(strata, 0.95))
    assert got.pairs == 30 * 25 + 12 * 17


def test_bisection_finds_the_same_order_statistics_as_listing_them():
    rng = random.Random(11)
    stratum = ([rng.lognormvariate(0, 0.3) for _ in range(520)], [rng.lognormvariate(0.05, 0.3) for _ in range(510)])
    assert 520 * 510 > ranktest._ENUMERATE_UP_TO  # the bisection's path
    got = ranktest.shift([stratum], 0.98)
    want = brute_shift([stratum], 0.98)
    assert (got.estimate, got.low, got.high) == pytest.approx(want, abs=ranktest.RESOLUTION)


def test_too_few_for_the_confidence_is_unbounded():
    got = ranktest.shift([([1.0, 2.0], [3.0])], 0.98)
    assert (got.low, got.high) == (-math.inf, math.inf) and got.estimate == 1.5


@pytest.mark.parametrize("confidence", [0.90, 0.98])
def test_interval_covers_a_known_shift_at_its_confidence(confidence):
    # 400 seeds of normal samples 0.5 apart: the interval must cover 0.5 about `confidence` of the time
    covered = 0
    for seed in range(400):
        rng = random.Random(seed)
        base = [rng.gauss(0, 1) for _ in range(40)]
        canary = [rng.gauss(0.5, 1) for _ in range(35)]
        got = ranktest.shift([(base, canary)], confidence)
        covered += got.low <= 0.5 <= got.high
    sd = math.sqrt(confidence * (1 - confidence) / 400)
    assert abs(covered / 400 - confidence) < 3 * sd + 0.01


def test_u_rejects_no_difference_at_its_level():
    # 1000 seeds of the same distribution: one-sided p < 0.05 in about 5% of them
    hits = sum(ranktest.mann_whitney([([r.expovariate(1) for _ in range(30)], [r.expovariate(1) for _ in range(30)])])
               .p_greater < 0.05 for r in (random.Random(s) for s in range(1000)))
    assert 30 <= hits <= 70


def test_iqr_drops_kayentas_own_outlier():
    # kayenta-judge DetectorSuite "IQR Detection": 50.0 is the one outlier at factor 1.5
    data = [21.0, 23.0, 24.0, 25.0, 50.0, 29.0, 23.0, 21.0]
    assert ranktest.iqr_keep(data, 1.5) == sorted(v for v in data if v != 50.0)
    assert ranktest.iqr_keep(data, 20.0) == sorted(data)


def test_quantile_interpolates_as_numpy_does():
    values = [1.0, 2.0, 4.0, 8.0, 16.0]
    assert ranktest.quantile(values, 0.5) == 4.0
    assert ranktest.quantile(values, 0.9) == pytest.approx(statistics.quantiles(values, n=10, method="inclusive")[8])



# recorded from scipy 1.17.1 (system python3, not a fleet dependency), the calls written above each test
SCIPY_R_P = 0.11033568095992347
SCIPY_TIES_U = 81.0
SCIPY_TIES_P = 0.03148101104396656


def test_the_upper_bound_is_the_one_sided_order_statistic():
    # one-sided at 0.99 is the upper end of the two-sided 0.98 interval
    rng = random.Random(5)
    strata = [([rng.gauss(0, 1) for _ in range(40)], [rng.gauss(0.2, 1) for _ in range(30)])]
    got = ranktest.shift(strata, 0.90, upper_confidence=0.99)
    assert got.upper == pytest.approx(brute_shift(strata, 0.98)[2])
    assert (got.estimate, got.low, got.high) == pytest.approx(brute_shift(strata, 0.90))
    assert ranktest.shift(strata, 0.90).upper == math.inf  # not asked for


def test_the_upper_bound_falls_below_a_known_shift_at_its_risk():
    # 400 seeds, samples 0.5 apart: the one-sided 0.95 bound is below 0.5 about 5% of the time
    below = 0
    for seed in range(400):
        rng = random.Random(seed)
        got = ranktest.shift([([rng.gauss(0, 1) for _ in range(40)], [rng.gauss(0.5, 1) for _ in range(35)])],
                             0.5, upper_confidence=0.95)
        below += got.upper < 0.5
    assert abs(below / 400 - 0.05) < 3 * math.sqrt(0.05 * 0.95 / 400) + 0.01
