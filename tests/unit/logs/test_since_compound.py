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


@pytest.mark.parametrize(("given", "journalctl"), [
    ("2026-12-06T11:26:17+0000", "@1796556377"), ("2026-12-06T11:26:17Z", "@1796556377"),
    ("2026-12-06T12:26:17+01:00", "@1796556377"), ("2026-12-06T11:26", "2026-12-06 11:26:00"),
])
def test_a_time_as_logs_json_writes_it_is_taken(given, journalctl):
    """`inv logs --json` writes a line's time as `2026-12-06T11:26:17+0000`; given back to --since it was refused,
    exit 2 (journalctl 252 refuses the T): with its offset it is that moment (seconds since the epoch, whatever the
    host's zone), without one a time on the host's clock."""
    assert check_since(given) == journalctl


@pytest.mark.parametrize(("given", "journalctl"), [
    ("12-06 15:37:01", "2026-12-06 15:37:01"), ("12-06 15:37", "2026-12-06 15:37:00"),
    ("12-31 23:59:59", "2025-12-31 23:59:59"),  # a day still ahead this year is last year's, as syslog's stamps
    ("12-06 05:01:13+0900", "@1796500873"),  # another zone's line, with the offset fleet shows: that moment
    ("2026-12-06 15:37:02,851", "2026-12-06 15:37:02.851"),  # python logging's, as sglang's lines carry it
])
def test_a_time_as_inv_logs_prints_it_is_taken(given, journalctl):
    """Issue 46, finding 9, a newcomer's form (h-new22): `inv logs` prefixes each line with its time on the host's
    clock, `sbx0 12-06 15:37:01 ...` (`12-06 05:01:13+0900` for a host in another zone); copied back into
    `--since '12-06 15:37:01'` to read from that line on, it was refused, exit 2, and so was the time in an sglang
    line's own words (`2026-12-06 15:37:02,851`). The year is this one's, or last year's for a day still ahead."""
    from datetime import datetime
    assert check_since(given, now=datetime(2026, 12, 6, 16, 0)) == journalctl
