"""fleet.multihost.slotune's trial records: what a resumed search reads back from its journal, and the front of
the load points that kept the promise."""

from __future__ import annotations

from fleet.multihost.slotune import TrialRecord, served


def test_a_record_reads_back_marked_as_measured_before_the_resume_once_however_often_resumed():
    r = TrialRecord("slo-base", {}, "READY", 10.0, [{"rate": 10.0, "passed": True}], 12.0, True, "the playbook's base")
    back = TrialRecord.from_json(r.to_json())
    assert (back.name, back.rate, back.short_rate, back.full, back.points) == ("slo-base", 10.0, 12.0, True, r.points)
    assert back.why == "the playbook's base (before the resume)"
    assert TrialRecord.from_json(back.to_json()).why == back.why


def test_only_kept_points_that_said_what_they_served_are_on_the_chart_per_gpu():
    r = TrialRecord("slo-x", {}, "READY", 8.0, [
        {"rate": 4.0, "passed": True, "tok_s": 800.0, "tok_s_per_user": 50.0},
        {"rate": 8.0, "passed": True, "tok_s": 1600.0, "tok_s_per_user": 30.0},
        {"rate": 16.0, "passed": False, "tok_s": 2000.0, "tok_s_per_user": 5.0},  # broke the promise
        {"rate": 6.0, "passed": True, "tok_s": None, "tok_s_per_user": None}])  # bench_serving said nothing
    points = served([r], gpus=8)
    assert [(p.rate, p.per_gpu, p.per_user) for p in points] == [(4.0, 100.0, 50.0), (8.0, 200.0, 30.0)]
