"""`inv logs` of hosts whose clocks are in different time zones: each line is on its host's clock, and a line
whose host's zone is not the first line's says its offset, so two hosts' lines of the same moment read as one."""

from __future__ import annotations

import io
import threading
import time
from types import SimpleNamespace

from rich.console import Console

from fleet.cli import logs
from fleet.logs.follow import LogLine


def test_a_line_on_another_zones_clock_says_its_offset(monkeypatch):
    """A newcomer's `inv logs -H sbx0,sbx2 -n 2` with sbx2's clock in Asia/Tokyo (issue 46, 9, a new form): `sbx0
    12-06 07:45:08 ...` beside `sbx2 12-06 16:45:47 ...`, the same minute nine hours apart, and nothing said of
    it (journalctl's short-iso has the offset; the line dropped it)."""
    monkeypatch.setenv("TZ", "UTC")  # this machine's zone: the operator's
    time.tzset()
    lines = {"sbx0": [LogLine("sbx0", "2026-12-06T07:45:08+0000", "GET /health 200", None, "python[7]")],
             "sbx2": [LogLine("sbx2", "2026-12-06T16:45:47+0900", "GET /health 200", None, "python[8]")]}
    order = threading.Lock()

    def stream(host, opts, follow, since, emit, stop, count=None) -> None:
        with order:
            for line in lines[host.name]:
                emit(line)

    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    hosts = [SimpleNamespace(name="sbx0"), SimpleNamespace(name="sbx2")]
    assert logs.run(hosts, None, False, None, None, False, console, read=stream) == 0  # type: ignore[arg-type]
    shown = console.export_text().splitlines()
    first = next(line for line in shown if line.startswith("sbx0"))
    other = next(line for line in shown if line.startswith("sbx2"))
    assert first.startswith("sbx0 12-06 07:45:08 GET") and other.startswith("sbx2 12-06 16:45:47+0900 GET"), shown
    assert logs.clock("2026-12-06T16:45:47+0900") == "12-06 16:45:47"  # --json and the other views: as before
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # an operator in Tokyo reads sbx0's offset instead
    time.tzset()
    assert logs.clock("2026-12-06T07:45:08+0000", zone=True) == "12-06 07:45:08+0000"
    assert logs.clock("2026-12-06T16:45:47+0900", zone=True) == "12-06 16:45:47"
    monkeypatch.delenv("TZ")
    time.tzset()
