"""A tune says which of the serving release's benchmark runs it is in (issue 46, finding 5; h-new21's hour): the
release serving before the tune is measured with a warm-up and `runs` runs (each up to bench.timeout, 600 s), and
only `measuring release ...` then `median of N runs` were said: off a terminal the same `phase bench: 30s of 600s
budget` line came back for each run, and which run it was (a rung's runs say `run 1 of 3`) was not said."""

from __future__ import annotations

from test_tune import _tuner, ok


def test_each_run_of_the_serving_release_is_said_as_a_rungs_run_is(tmp_path):
    _, said = _tuner(tmp_path, [ok(3000.0), ok(3700.0), ok(3740.0)])
    lines = [str(m) for m in said]
    assert "release r-before: warm-up 3,000 tok/s (not counted)" in lines, lines
    assert "release r-before: run 1 of 2: 3,700 tok/s" in lines, lines
    assert "release r-before: run 2 of 2: 3,740 tok/s" in lines, lines
