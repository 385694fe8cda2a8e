"""fleet.deploy.pareto: the points no other dominates, ordered along the front."""

from __future__ import annotations

from fleet.deploy.pareto import Served, front


def test_the_front_keeps_only_points_no_other_beats_on_both():
    a = Served("a", 1.0, per_gpu=100.0, per_user=80.0)
    b = Served("b", 2.0, per_gpu=300.0, per_user=40.0)
    c = Served("c", 2.0, per_gpu=200.0, per_user=30.0)  # b beats it on both
    d = Served("d", 4.0, per_gpu=500.0, per_user=10.0)
    e = Served("e", 1.0, per_gpu=100.0, per_user=70.0)  # a is as good per GPU, better per user
    assert front([a, b, c, d, e]) == [a, b, d]


def test_equal_points_appear_once_the_first_measured_and_an_empty_list_has_no_front():
    a, a2 = Served("a", 1.0, 100.0, 50.0), Served("a2", 1.0, 100.0, 50.0)
    assert front([a, a2]) == [a]
    assert front([]) == []
