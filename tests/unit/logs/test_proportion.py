"""Wilson's interval, written once (fleet.logs.proportion): bysite's held-out policy, the benches and the tests that
state a rate all ask it, where four copies had been written (bysite.wilson_upper, bench/benchstats.wilson,
test_site_classes' and test_replicates')."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet.logs.proportion import wilson

REPO = Path(__file__).resolve().parents[3]


def test_the_interval_of_known_proportions():
    assert wilson(489, 511) == pytest.approx((0.9357, 0.9714), abs=1e-4)  # server_arguments' held-out record
    assert wilson(14, 17)[1] == pytest.approx(0.938, abs=1e-3)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4) and wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)  # no trial: no evidence either way


def test_wilsons_interval_is_written_once():
    """Fails before: bysite, bench/benchstats.py and two tests each wrote the formula."""
    formula = re.compile(r"z \* z / \(4 \* n \* n\)")
    copies = [str(p.relative_to(REPO)) for top in ("fleet", "bench", "tests", "tasks.py")
              for p in ((REPO / top).rglob("*.py") if (REPO / top).is_dir() else [REPO / top])
              if formula.search(p.read_text(errors="replace"))]
    assert copies == ["fleet/logs/proportion.py"], copies
