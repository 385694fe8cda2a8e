"""fleet.deploy.replicates: ABBA order, the t interval of the log ratio, a winner only when it excludes 1, and
about 5% false winners on identical configurations."""

from __future__ import annotations

import math
import random

import pytest

from fleet.deploy import replicates
from fleet.deploy.replicates import Side


def test_the_starts_alternate_in_abba_blocks():
    assert replicates.order(3) == [Side.A, Side.B, Side.B, Side.A, Side.A, Side.B]


def test_the_t_quantile_is_the_tables_and_its_expansion_joins_it():
    assert replicates.t975(1) == 12.706 and replicates.t975(3) == 3.182
    assert abs(replicates.t975(31) - 2.040) < 0.001  # the table's 2.0395
    assert abs(replicates.t975(120) - 1.980) < 0.001
    with pytest.raises(ValueError):
        replicates.t975(0)


def test_the_interval_is_the_mean_log_ratio_plus_minus_t_times_its_standard_error():
    a, b = [10.0, 10.0, 10.0], [11.0, 10.8, 11.1]
    logs = [math.log(y / x) for x, y in zip(a, b, strict=True)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    c = replicates.compare(a, b)
    assert c.pairs == 3 and c.ratio == pytest.approx(math.exp(mean))
    assert c.low == pytest.approx(math.exp(mean - 4.303 * sd / math.sqrt(3)))
    assert c.high == pytest.approx(math.exp(mean + 4.303 * sd / math.sqrt(3)))
    assert c.winner is Side.B and "beats" in c.says("base", "tuned")


def test_a_difference_within_the_noise_names_no_winner():
    c = replicates.compare([10.0, 10.4, 9.8, 10.1], [10.2, 10.0, 10.1, 10.3])
    assert c.low < 1 < c.high and c.winner is None
    assert c.says("x", "y").startswith("x and y are equal within noise")


def test_a_clearly_slower_b_makes_a_the_winner():
    assert replicates.compare([10.0, 10.1, 9.9], [9.0, 9.1, 8.95]).winner is Side.A


def test_one_pair_says_nothing_and_bad_input_is_refused():
    assert replicates.compare([10.0], [20.0]).winner is None
    with pytest.raises(ValueError):
        replicates.compare([10.0, 11.0], [10.0])
    with pytest.raises(ValueError):
        replicates.compare([10.0, 0.0], [10.0, 11.0])


def test_identical_configurations_are_called_different_in_about_five_percent_of_comparisons():
    rng = random.Random(7)
    runs, wins = 2000, 0
    for _ in range(runs):
        a = [10 * math.exp(rng.gauss(0, 0.015)) for _ in range(4)]
        b = [10 * math.exp(rng.gauss(0, 0.015)) for _ in range(4)]
        wins += replicates.compare(a, b).winner is not None
    assert 0.035 < wins / runs < 0.065  # 5% within about 3 standard errors of 2,000 runs
