"""`inv logs`: the sglang unit's journal from a host, each line classified live with the logwatch rules."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from fleet.errors import InputError
from fleet.inventory import Host
from fleet.logs import journal
from fleet.logs.classify import Event
from fleet.logs.watch import LogWatcher
from fleet.outcomes import Outcome
from fleet.ssh.connect import ConnectOptions, open_connection

_SINCE = re.compile(r"^\d+(s|m|min|h|d)$")


@dataclass
class LogLine:
    host: str
    time: str | None
    text: str
    event: Event | None


def check_since(since: str | None) -> None:
    if since is not None and not _SINCE.fullmatch(since):
        raise InputError(f"--since {since}: use a span such as 30s, 10m, 2h or 1d")


def journal_command(unit: str, follow: bool, since: str | None) -> str:
    check_since(since)
    return journal.command(unit, output="short-iso", since=since, follow=follow)


def split_time(line: str) -> tuple[str | None, str]:
    """`2026-11-30T13:05:39+0000 host proc[pid]: text` -> (time, text)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) \S+ [^:]+: (.*)$", line)
    return (m.group(1), m.group(2)) if m else (None, line)


def stream(host: Host, opts: ConnectOptions, follow: bool, since: str | None, emit: Callable[[LogLine], None],
           stop: threading.Event) -> None:
    """The unit's journal, each line emitted as it comes and each event (a traceback closes on a later line,
    a wrapper finds its cause) emitted on its own with its evidence, until the journal ends or `stop`."""
    conn = open_connection(host, opts)
    try:
        when: str | None = None

        def line(raw: str) -> str:
            nonlocal when
            when, text = split_time(raw)
            emit(LogLine(host.name, when, text, None))
            return text

        watcher = LogWatcher(on_event=lambda e: emit(LogLine(host.name, when, e.text, e)), on_line=line,
                             raise_on_fatal=False)
        journal.follow(journal.Follower(conn, host, journal_command(host.unit, follow, since)), watcher,
                       lambda: (Outcome.STOPPED, "stopped") if stop.is_set() else None)
        when = None
        watcher.finish()
    finally:
        conn.close()
