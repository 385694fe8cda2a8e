"""`inv logs` of several hosts without -f: each host's lines together, in the order the hosts were given, whichever
answered first: issue 46, finding 9, a newcomer's form (h-new19). `inv logs -n 2` twice showed sbx0, sbx3, sbx1
then sbx0, sbx1, sbx3: the order the hosts' journals came back in."""

from __future__ import annotations

import io
import threading
from types import SimpleNamespace

from rich.console import Console

from fleet.cli import logs
from fleet.logs.follow import LogLine
from fleet.logs.ranks import NEAR_S


def test_the_hosts_lines_come_in_the_order_given_not_the_order_they_answered():
    first_done = threading.Event()

    def stream(host, opts, follow, since, emit, stop, count=None) -> None:
        if host.name == "sbx0":  # the slow one, given first: it answers once sbx1's lines were drawn
            first_done.wait(5)
            stop.wait(NEAR_S)  # beyond the longest a line is held for its ranks' copies: sbx1's were drawn by then
        for n in (1, 2):
            emit(LogLine(host.name, f"2026-12-06T11:56:2{n}+0000", f"line {n} of {host.name}", None,
                         f"python[{n}]"))
        if host.name == "sbx1":
            first_done.set()

    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    hosts = [SimpleNamespace(name="sbx0"), SimpleNamespace(name="sbx1"), SimpleNamespace(name="sbx2")]
    assert logs.run(hosts, None, False, None, None, False, console, read=stream) == 0  # type: ignore[arg-type]
    said = [line.split(" ", 3)[3] for line in console.export_text().splitlines() if line.strip()]
    assert said == [f"line {n} of {h}" for h in ("sbx0", "sbx1", "sbx2") for n in (1, 2)], said
