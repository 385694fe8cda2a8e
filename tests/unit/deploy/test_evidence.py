"""fleet.deploy.evidence: what the fleet learned per rung and host, and the rules read from it (pure)."""

from __future__ import annotations

import pytest

from fleet.deploy import evidence

LADDER = ["fusion", "greedy", "fast", "safe"]


def results(*rows: tuple[str, str, str] | tuple[str, str, str, float, float]) -> evidence.Rungs:
    """(rung, host, outcome[, tok/s, spread]) added in order."""
    rungs: evidence.Rungs = {}
    for i, row in enumerate(rows):
        tok, spread = (row[3], row[4]) if len(row) == 5 else (None, None)
        rungs = evidence.add(rungs, row[0], {"rung": row[0]}, row[1], row[2], f"t{i:02}", tok, spread, f"r{i}")
    return rungs


def skip(rungs: evidence.Rungs, rung: str) -> str | None:
    return evidence.skip_reason(rungs[rung])


def test_one_crash_is_not_evidence_a_second_on_another_host_is():
    once = results(("greedy", "h1", "CUDA_OOM"))
    assert skip(once, "greedy") is None and evidence.unconfirmed(once["greedy"])
    assert skip(results(("greedy", "h1", "CUDA_OOM"), ("greedy", "h2", "CUDA_OOM")), "greedy") == \
        "CUDA_OOM, seen 2x on 2 hosts: h1, h2"
    assert skip(results(("greedy", "h1", "TMA_FAILURE"), ("greedy", "h2", "TMA_FAILURE")), "greedy") == \
        "TMA_FAILURE, seen 2x on h1, h2: no host alone causes it"


@pytest.mark.parametrize("outcome", sorted(evidence.HOST_LOCAL))
def test_a_class_one_host_can_cause_is_never_known_bad_from_that_host_alone(outcome):
    """Issue 52, 6: two out-of-memory failures on one host (another tenant's memory, a re-run) skip nothing."""
    rungs = results(*[("greedy", "h1", outcome)] * 3)
    assert skip(rungs, "greedy") is None and evidence.unconfirmed(rungs["greedy"])
    assert evidence.standing(rungs["greedy"]) == f"{outcome} seen 3x on h1 only: not known-bad until a second host"
    rungs = evidence.add(rungs, "greedy", {"rung": "greedy"}, "h2", outcome, "t9")
    assert skip(rungs, "greedy") == f"{outcome}, seen 4x on 2 hosts: h1, h2"
    assert evidence.standing(rungs["greedy"]) == f"known-bad: {outcome}, seen 4x on 2 hosts: h1, h2"


@pytest.mark.parametrize("outcome", sorted(evidence.FINGERPRINT_WIDE))
def test_a_class_no_host_alone_causes_is_known_bad_on_its_second_sighting_on_one_host(outcome):
    rungs = results(("greedy", "h1", outcome))
    assert skip(rungs, "greedy") is None
    assert evidence.standing(rungs["greedy"]).endswith("not known-bad until a second sighting")
    assert skip(results(*[("greedy", "h1", outcome)] * 2), "greedy") == \
        f"{outcome}, seen 2x on h1: a class of the hardware and stack, not of the host"


def test_a_rung_within_noise_never_becomes_the_winner():
    """Issue 52, 2: tune said `no-cuda-graph +10 tok/s is within noise: plain stays`; so does the fleet."""
    ladder = ["plain", "no-cuda-graph"]
    rungs = results(("plain", "h1", "READY", 1000.0, 30.0), ("no-cuda-graph", "h1", "READY", 1010.0, 25.0))
    out = evidence.summary(rungs, ladder)
    assert (out.rung, out.tok_s) == ("plain", 1000.0)
    assert out.why == ("the first rung of the ladder that serves (plain); no-cuda-graph against plain: 1,010 "
                       "against 1,000 tok/s, +10 is within noise (needs more than 30: spreads 25, 30; min gain "
                       "2%): plain stays")
    rungs = results(("plain", "h1", "READY", 1000.0, 30.0), ("no-cuda-graph", "h1", "READY", 1100.0, 25.0))
    out = evidence.summary(rungs, ladder)
    assert out.rung == "no-cuda-graph" and out.why.startswith("no-cuda-graph beats plain: 1,100 against 1,000")
    assert evidence.summary(rungs, ladder, min_gain=0.2).rung == "plain"  # the playbook's min_gain decides


def test_a_measured_rung_never_beats_one_that_was_not_measured():
    rungs = results(("plain", "h1", "READY"), ("fast", "h2", "READY", 5000.0, 10.0))
    assert evidence.summary(rungs, ["plain", "fast"]).rung == "plain"


@pytest.mark.parametrize("outcome", ["HANG", "COMM_FAILURE", "INSTALL_FAILED", "EXITED", "HEALTH_FAILED",
                                     "BENCH_FAILED", "GPU_FAULT", "PERF_REGRESSION"])
def test_host_local_and_environmental_classes_never_count_however_often(outcome):
    rungs = results(*[("greedy", f"h{i % 2}", outcome) for i in range(5)])
    assert skip(rungs, "greedy") is None and not evidence.unconfirmed(rungs["greedy"])
    assert rungs["greedy"].hosts["h0"].failures == {outcome: 3}  # kept as evidence


@pytest.mark.parametrize("outcome", ["PREFLIGHT", "STOPPED", "INTERRUPTED"])
def test_a_rung_not_run_to_its_end_is_no_result_at_all(outcome):
    assert results(("greedy", "h1", outcome)) == {}


def test_a_rung_whose_latest_result_somewhere_is_a_serve_is_never_skipped():
    rungs = results(("greedy", "h1", "CUDA_OOM"), ("greedy", "h2", "CUDA_OOM"), ("greedy", "h3", "READY"))
    assert skip(rungs, "greedy") is None
    mine = rungs["greedy"].hosts
    # a serve clears that host's own failures; the others' stay
    rungs = evidence.add(rungs, "greedy", {"rung": "greedy"}, "h1", "READY", "t9")
    assert rungs["greedy"].hosts["h1"].failures == {} and mine["h2"].failures


def test_changed_flags_start_the_rungs_evidence_again():
    rungs = results(("greedy", "h1", "CUDA_OOM"), ("greedy", "h2", "CUDA_OOM"))
    rungs = evidence.add(rungs, "greedy", {"mem-fraction-static": 0.8}, "h3", "CUDA_OOM", "t9")
    assert skip(rungs, "greedy") is None and list(rungs["greedy"].hosts) == ["h3"]


def test_the_winner_is_the_fastest_measured_rung_that_serves_not_the_last_write():
    rungs = results(("fast", "h1", "READY", 3740.0, 40.0), ("safe", "h2", "READY", 880.0, 10.0),
                    ("fast", "h3", "HANG"), ("safe", "h3", "READY"))  # one host's hang then fall-back
    out = evidence.summary(rungs, LADDER)
    assert (out.rung, out.tok_s, out.spread, out.host, out.release) == ("fast", 3740.0, 40.0, "h1", "r0")
    # a second tune elsewhere: the median of the hosts' measurements, the spread the widest of theirs and the range
    rungs = evidence.add(rungs, "fast", {"rung": "fast"}, "h4", "READY", "t9", 3600.0, 30.0, "r9")
    out = evidence.summary(rungs, LADDER)
    assert (out.rung, out.tok_s, out.spread) == ("fast", 3670.0, 140.0)


def test_without_measurements_the_first_serving_rung_of_the_ladder_wins():
    rungs = results(("safe", "h1", "READY"), ("fast", "h2", "READY"), ("safe", "h3", "READY"))
    assert evidence.summary(rungs, LADDER).rung == "fast"
    assert evidence.summary(results(("greedy", "h1", "CUDA_OOM")), LADDER).rung is None


def test_summary_names_each_rungs_failure_of_note_and_whether_it_skips():
    rungs = results(("greedy", "h1", "CUDA_OOM"), ("fusion", "h1", "PERF_REGRESSION", 78.6, 2.0),
                    ("safe", "h1", "HANG"), ("fast", "h1", "READY"))
    failed = evidence.summary(rungs, LADDER).to_json()["failed"]
    assert failed == {"greedy": {"outcome": "CUDA_OOM", "flags": {"rung": "greedy"}, "seen": 1, "hosts": ["h1"],
                                 "skipped": False},
                      "fusion": {"outcome": "PERF_REGRESSION", "flags": {"rung": "fusion"}, "seen": 1,
                                 "hosts": ["h1"], "skipped": False}}


def test_a_hand_edited_record_is_read_as_data():
    record = evidence.RungEvidence.from_json({"flags": [], "hosts": {"h1": {"served": "lots", "tok_s": -3,
                                                                           "failures": {"CUDA_OOM": True,
                                                                                        "TMA_FAILURE": 2}},
                                                                    "h2": "junk"}})
    assert record.flags == {} and record.hosts["h1"].served == 0 and record.hosts["h1"].tok_s is None
    assert record.hosts["h1"].failures == {"TMA_FAILURE": 2} and record.hosts["h2"].served == 0


def test_a_version_1_entry_becomes_evidence_with_its_counts_and_hosts():
    entry = {"rung": "fast", "flags": {"a": 1}, "tok_s": 3740.0, "spread": 40.0, "host": "h1", "release": "r1",
             "failed": {"greedy": {"outcome": "CUDA_OOM", "flags": {"b": 2}, "seen": 3, "hosts": ["h1", "h2"]},
                        "fusion": {"outcome": "TMA_FAILURE", "flags": {}}, "junk": "x"}}
    rungs = evidence.from_legacy(entry)
    hosts = {name: {h: m.failures or m.served for h, m in r.hosts.items()}
             for name, r in rungs.items()}
    assert hosts == {"fast": {"h1": 1}, "greedy": {"h1": {"CUDA_OOM": 2}, "h2": {"CUDA_OOM": 1}},
                     "fusion": {"h1": {"TMA_FAILURE": 1}}}
    assert evidence.summary(rungs, ["greedy", "fast"]).tok_s == 3740.0
