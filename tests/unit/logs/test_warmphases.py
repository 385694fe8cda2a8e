"""What a warm start expects of its phases (fleet.logs.warmphases): pure, values in, lines out."""

from __future__ import annotations

import json

from fleet.logs.warmphases import Expect, PhaseClock, PhaseTimes

COLD = PhaseTimes((("start", 3.0), ("weight_load", 40.0), ("jit_compile", 30.0), ("graph_capture", 260.0)))
WARM = Expect.placed("sbx0", COLD)


def test_a_cold_start_expects_nothing_and_says_nothing():
    cold = Expect.cold_start()
    assert cold.opening() is None and cold.entering("jit_compile") is None
    assert cold.leaving("graph_capture", 300.0) is None and cold.skipped(PhaseTimes()) == []
    assert cold.standing_note("graph_capture") == "" and cold.expected_s("graph_capture") is None


def test_a_warm_start_says_which_phases_it_expects_short():
    assert WARM.opening() == ("warm start: jit_compile, autotune, graph_capture expected short or skipped "
                              "(caches of sbx0 placed)")
    assert WARM.entering("jit_compile") == "warm start: jit_compile expected short; the cold start of sbx0 took 30s"
    assert WARM.entering("weight_load") is None  # weights are no cache's
    assert WARM.standing_note("graph_capture") == " (warm: expected under 182s)"


def test_a_warm_phase_as_long_as_the_cold_one_is_reported_with_its_name():
    said = WARM.leaving("graph_capture", 250.0)
    assert said is not None and said.startswith("warm start: the cache did not take in graph_capture: 250.0s, "
                                                "as long as the cold start's 260.0s")
    assert WARM.leaving("graph_capture", 12.0) == "warm start: graph_capture took 12.0s (cold: 260.0s)"
    assert WARM.leaving("weight_load", 40.0) is None


def test_a_short_cold_phase_or_an_entry_without_times_judges_nothing():
    short = Expect.placed("sbx0", PhaseTimes((("jit_compile", 2.0),)))
    assert short.leaving("jit_compile", 2.5) == "warm start: jit_compile took 2.5s (cold: 2.0s)"
    unknown = Expect.placed("sbx0", PhaseTimes())
    assert unknown.leaving("autotune", 500.0) == "warm start: autotune took 500.0s"
    assert unknown.entering("autotune") == "warm start: autotune expected short"


def test_the_phases_a_warm_start_did_not_go_through_are_said_skipped():
    seen = PhaseClock()
    for phase, s in (("start", 3.0), ("weight_load", 40.0), ("graph_capture", 8.0)):
        seen.left(phase, s)
    assert WARM.skipped(seen.times()) == ["warm start: jit_compile skipped (the cold start took 30.0s in it)"]


def test_phase_times_read_back_from_a_stored_entry_and_garbage_reads_as_none():
    assert PhaseTimes.from_json(COLD.to_json()) == COLD
    assert PhaseTimes.from_json(json.loads(json.dumps(COLD.to_json(), sort_keys=True))) == COLD  # order kept
    assert PhaseTimes.from_json([["jit_compile", "x"], ["autotune", True], ["graph_capture", -1], ["ready", 2],
                                 ["start"], 7]) == PhaseTimes((("ready", 2.0),))
    assert PhaseTimes.from_json({"jit_compile": 3}) == PhaseTimes()
