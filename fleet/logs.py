"""`inv logs`: the sglang unit's journal from one or many hosts, classified live with the logwatch rules."""

from __future__ import annotations

import json
import re
import shlex
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from fleet import redact
from fleet.connect import ConnectOptions, open_connection, wrap
from fleet.errors import FleetError, InputError
from fleet.inventory import Host
from fleet.logclassify import Event, LineClassifier
from fleet.logrules import Severity

_SINCE = re.compile(r"^\d+(s|m|min|h|d)$")
_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.FATAL: 2}
_STYLE = {Severity.FATAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "green"}


@dataclass
class LogLine:
    host: str
    time: str | None
    text: str
    event: Event | None


def journal_command(unit: str, follow: bool, since: str | None) -> str:
    if since is not None and not _SINCE.match(since):
        raise InputError(f"--since {since}: use a span such as 30s, 10m, 2h or 1d")
    cmd = f"journalctl -u {shlex.quote(unit)} -o short-iso --no-pager"
    if since:
        cmd += f" --since=-{since}"
    return cmd + (" -f" if follow else "")


def split_time(line: str) -> tuple[str | None, str]:
    """`2026-11-30T13:05:39+0000 host proc[pid]: text` -> (time, text)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) \S+ [^:]+: (.*)$", line)
    return (m.group(1), m.group(2)) if m else (None, line)


def stream(host: Host, opts: ConnectOptions, follow: bool, since: str | None, emit: Callable[[LogLine], None],
           stop: threading.Event) -> None:
    conn = open_connection(host, opts)
    try:
        chan = conn.client.get_transport().open_session()
        chan.exec_command(wrap(host, journal_command(host.unit, follow, since)))
        classifier, buf = LineClassifier(), b""
        while not stop.is_set():
            if not chan.recv_ready():
                if chan.exit_status_ready() and not chan.recv_ready():
                    break
                stop.wait(0.1)
                continue
            data = chan.recv(65536)
            if not data:
                break
            *lines, buf = (buf + data).split(b"\n")
            for raw in lines:
                when, text = split_time(redact.line(raw.decode("utf-8", "replace")))
                emit(LogLine(host.name, when, text, None))
                # An event may close on a later line (a traceback ends, a wrapper finds its cause): it is
                # reported on its own, with its evidence line, not pinned on the line that closed it.
                for event in classifier.feed(text):
                    emit(LogLine(host.name, when, event.text, event))
        for event in classifier.flush():
            emit(LogLine(host.name, None, event.text, event))
        chan.close()
    finally:
        conn.close()


def run(hosts: Sequence[Host], opts: ConnectOptions, follow: bool, since: str | None, only: str | None,
        as_json: bool, console: Console) -> int:
    if only not in (None, "fatal", "warning"):
        raise InputError(f"--only {only}: use fatal or warning")
    journal_command("x", follow, since)  # bad --since fails before any host is contacted
    floor = {"fatal": 2, "warning": 1, None: -1}[only]
    lock, stop = threading.Lock(), threading.Event()
    width = max(len(h.name) for h in hosts)

    def emit(line: LogLine) -> None:
        rank = _RANK[line.event.severity] if line.event else -1
        if rank < floor or (floor >= 0 and line.event is None):
            return
        with lock:
            if as_json:
                try:
                    sys.stdout.write(json.dumps({
                        "host": line.host, "time": line.time, "text": line.text,
                        "class": str(line.event.log_class) if line.event else None,
                        "severity": str(line.event.severity) if line.event else None,
                        "remedy": line.event.remedy if line.event else None}) + "\n")
                    sys.stdout.flush()
                except BrokenPipeError:  # the reader went away (| head): stop quietly
                    stop.set()
            elif line.event:
                style = _STYLE[line.event.severity]
                console.print(f"[dim]{line.host:<{width}}[/] [{style}]>> {line.event.log_class} "
                              f"({line.event.severity}): {escape(line.event.explanation)}[/]\n"
                              f"[dim]{'':<{width}}[/] [{style}]   {escape(line.text)}[/]"
                              + (f"\n[dim]{'':<{width}}[/]    next: {escape(line.event.remedy)}"
                                 if line.event.remedy else ""), soft_wrap=True, highlight=False)
            else:
                console.print(f"[dim]{line.host:<{width}}[/] {escape(line.text)}", soft_wrap=True, highlight=False)

    errors: dict[str, str] = {}

    def one(host: Host) -> None:
        try:
            stream(host, opts, follow, since, emit, stop)
        except Exception as exc:  # one host's failure must not end the others' streams
            errors[host.name] = str(exc) if isinstance(exc, FleetError) else f"{host.name}: {exc}"

    # Plain threads, not a pool: Ctrl-C must set `stop` before anything waits for the streams to end.
    threads = [threading.Thread(target=one, args=(h,), daemon=True) for h in hosts]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join(timeout=5)
        return 130
    for message in errors.values():
        if as_json:
            sys.stderr.write(f"error: {message}\n")
        else:
            console.print(f"[red]{escape(message)}[/]", soft_wrap=True)
    return 1 if errors else 0
