"""A remedy in `inv logs` that sends the operator to the journal says the command for this host and this line's time
(issue 46, finding 9, a newcomer's form, h-new22). sglang's `Rank 0 scheduler is dead` said `next: read the lines
before it for the worker's error (inv logs --host H --since 10m)`: read at 3 a.m. of a failure at 20:00 (`inv logs
--only fatal`), that command showed the last ten minutes, health checks, never the lines before it; and the host
was left to type."""

from __future__ import annotations

import io
import time
from types import SimpleNamespace

from rich.console import Console

from fleet.cli import logs
from fleet.logs.classify import Event
from fleet.logs.follow import LogLine
from fleet.logs.rules import LogClass, Severity


def test_a_remedy_naming_inv_logs_says_this_host_and_a_since_before_the_line(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    remedy = ("read the lines before it for the worker's error (inv logs --host H --since 10m); a worker killed by "
              "the OOM killer shows in dmesg")
    event = Event(1, 1, LogClass.FATAL, Severity.FATAL, "Rank 0 scheduler is dead.", "scheduler-dead", 1,
                  "an sglang worker died; the lines before it say why", (remedy,), remedy)
    line = LogLine("sbx0", "2026-12-06T20:00:07+0000", "[2026-12-06 20:00:07] Rank 0 scheduler is dead.", event,
                   "python[7]")

    def stream(host, opts, follow, since, emit, stop, count=None) -> None:
        emit(line)

    console = Console(width=400, record=True, file=io.StringIO(), color_system=None)
    logs.run([SimpleNamespace(name="sbx0")], None, False, None, None, False, console, read=stream)  # type: ignore
    said = console.export_text()
    assert "next: read the lines before it for the worker's error (inv logs --host sbx0 --since '12-06 19:58:07'); " \
           "a worker killed" in said, said
    assert "--host H" not in said and "--since 10m" not in said, said
