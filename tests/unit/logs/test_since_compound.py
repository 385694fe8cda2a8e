"""`inv logs --since` as an operator types a span: issue 46, finding 9, a newcomer's form (h-new19). `--since 2h`
and `--since -1h30m` were taken, `--since 1h30m` and `--since 1.5h` refused (exit 2), and journalctl's months and
years (`-1month`, `-1y`, read by journalctl 252 on sandbox host sbx0) refused too."""

from __future__ import annotations

import pytest

from fleet.errors import InputError
from fleet.logs.follow import check_since


@pytest.mark.parametrize(("given", "journalctl"), [
    ("1h30m", "-1h30m"), ("1.5h", "-1.5h"), ("2d12h", "-2d12h"), ("90min", "-90min"), ("-1M", "-1M"),
    ("-1month", "-1month"), ("1y", "-1y"), ("2 months ago", "-2months"), ("-1.5d", "-1.5d"),
])
def test_a_span_of_several_parts_or_a_fraction_is_taken_as_journalctl_takes_it(given, journalctl):
    assert check_since(given) == journalctl


@pytest.mark.parametrize("given", ["1h30", "1.h", "1h-30m", "10 minutes", "1x", "1h;id"])
def test_what_is_no_span_is_still_refused(given):
    with pytest.raises(InputError, match="--since"):
        check_since(given)
