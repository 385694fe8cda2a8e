"""`inv logs --since 23:00` at 3 a.m.: a time alone is today's on the host's clock, as journalctl reads it, so last
night's lines are not in it: issue 46, finding 9, a newcomer's form (h-new19). It said `no journal lines since
23:00: sbx0`, exit 0, which reads as a server that logged nothing since last night."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from types import SimpleNamespace

from rich.console import Console

from fleet.cli import logs


def test_no_lines_since_a_time_alone_says_it_is_today_s_and_spells_yesterday_s(capsys):
    def stream(host, opts, follow, since, emit, stop, count=None) -> None:
        return None  # journalctl's `-- No entries --`: a time still ahead on the host's clock

    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    logs.run([SimpleNamespace(name="sbx0")], None, False, "23:00", None, False, console,  # type: ignore[arg-type]
             read=stream)
    said = capsys.readouterr().err
    assert "no journal lines since 23:00: sbx0 (23:00 alone is today's on each host's clock" in said
    assert said.rstrip().endswith(f"yesterday's is '{(datetime.now() - timedelta(days=1)):%Y-%m-%d} 23:00')")


def test_the_hint_is_for_a_time_alone_only():
    night = datetime(2026, 12, 6, 3, 0)
    assert logs.today_only("23:00", night).endswith("yesterday's is '2026-12-05 23:00')")
    assert logs.today_only("23:00:15 UTC", night).endswith("'2026-12-05 23:00:15 UTC')")
    assert logs.today_only("2026-12-05 23:00", night) == logs.today_only("2h", night) == logs.today_only(None) == ""
