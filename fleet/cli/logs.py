"""`inv logs`: journals of one or many hosts at once, each line with its host and its time on the host's clock,
the copies every tensor-parallel rank prints of one line folded into one with a count (fleet.logs.ranks),
classified lines coloured with their remedy; Ctrl-C ends it (exit 130)."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fleet.errors import FleetError, InputError
from fleet.inventory import Host
from fleet.logs.follow import LogLine, check_lines, check_since, stream
from fleet.logs.ranks import Folded, RankFolder
from fleet.logs.rules import Severity
from fleet.ssh.connect import ConnectOptions

Reader = Callable[[Host, ConnectOptions, bool, str | None, Callable[[LogLine], None], threading.Event,
                   int | str | None], None]  # a host's journal read: fleet.logs.follow.stream

if TYPE_CHECKING:
    from rich.console import Console

_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.FATAL: 2}
_STYLE = {Severity.FATAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "green"}


_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # a colour code (SGR): left out; any other escape is shown, never obeyed


def on_screen(text: str) -> str:
    """What a terminal shows of a journal line: a progress bar's last state (tqdm writes each update after a
    `\\r`, one line at the end), its colour codes left out; every other control character is escape()'s."""
    parts = [part for part in _COLOUR.sub("", text).split("\r") if part.strip()]
    return parts[-1] if parts else text


_TO_JOURNAL = re.compile(r"inv logs --host H --since 10m")  # the rules' pointer to the lines around a failure
BEFORE = timedelta(minutes=2)  # the lines before a failure (a worker's traceback) come within seconds of it


def here(remedy: str, host: str, time: str | None) -> str:
    """A remedy's `inv logs --host H --since 10m` for this host and this line's time: read later (at 3 a.m., of a
    failure at 20:00), `--since 10m` showed the last ten minutes, never the lines before it."""
    try:
        at = datetime.strptime(time or "", "%Y-%m-%dT%H:%M:%S%z") - BEFORE
    except ValueError:
        return _TO_JOURNAL.sub(f"inv logs --host {host} --since 10m", remedy)
    since = clock(at.strftime("%Y-%m-%dT%H:%M:%S%z"), zone=True)
    return _TO_JOURNAL.sub(f"inv logs --host {host} --since '{since}'", remedy)


def clock(time: str | None, zone: bool = False) -> str:
    """'2026-11-30T13:05:39+0000' (journalctl's short-iso, the host's clock) -> '11-30 13:05:39'; with `zone`, and
    the host's clock in another zone than this machine's at that moment, its offset too ('11-30 22:05:39+0900')."""
    if not time or len(time) < 19:
        return "-" * 14
    shown = f"{time[5:10]} {time[11:19]}"
    try:
        at = datetime.strptime(time, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return shown
    return shown + time[19:] if zone and at.utcoffset() != at.astimezone().utcoffset() else shown


def run(hosts: Sequence[Host], opts: ConnectOptions, follow: bool, since: str | None, only: str | None,
        as_json: bool, console: Console, lines: int | str | None = None, read: Reader = stream,
        err: Console | None = None) -> int:
    """`inv logs`: each host's journal (`read`: fleet.logs.follow.stream), drawn on `console` or as --json lines;
    a host whose journal could not be read is an error on stderr (`err`), never among the lines. Exit 1 when a
    fatal line was shown or a host could not be read."""
    if only not in (None, "fatal", "warning"):
        raise InputError(f"--only {only}: use fatal or warning")
    check_since(since)  # bad --since or --lines fails before any host is contacted
    lines = check_lines(lines)
    if lines == 0 and not follow:
        raise InputError("--lines 0 shows nothing without -f; with -f it follows only the lines that come from now on "
                         "(as tail -n 0 -f)")
    # -n with --only: the last N lines --only shows, as `journalctl -p err -n N` counts (the span read whole)
    last_shown = int(lines) if lines is not None and only and not follow else None
    from fleet.cli.hosttext import escape, visible
    floor = {"fatal": 2, "warning": 1, None: -1}[only]
    lock, stop = threading.Lock(), threading.Event()
    width = max(len(h.name) for h in hosts)
    fatal: dict[str, int] = {}  # host -> fatal lines shown (a line its ranks all print: once): exit 1

    kept: dict[str, deque[Folded]] = {h.name: deque(maxlen=last_shown) for h in hosts}
    explained: dict[str, tuple[object, ...]] = {}  # host -> the last classified line's words: said once in a row

    def shown(folded: Folded) -> None:
        line = folded.line
        rank = _RANK[line.event.severity] if line.event else -1
        if line.boot is None and (rank < floor or (floor >= 0 and line.event is None)):  # a boot shows with --only
            return  # too, as `journalctl -p err` shows it: the host started again between two fatal lines
        if last_shown is not None:
            kept[line.host].append(folded)
        elif ordered and line.host != hosts[min(head[0], len(hosts) - 1)].name:
            waiting[line.host].append(folded)
        else:
            draw(folded)

    # Without -f, hosts' lines in the order the hosts were given (each host's whole, the first one still read
    # streamed as it comes), not in the order the hosts answered: two runs of `inv logs -n 3` read alike.
    ordered = not follow and last_shown is None and len(hosts) > 1
    waiting: dict[str, list[Folded]] = {h.name: [] for h in hosts}
    head = [0]

    def advance() -> None:
        """Draw what the hosts before the first one still read have said (under the lock)."""
        while head[0] < len(hosts):
            name = hosts[head[0]].name
            for folded in waiting[name]:
                draw(folded)
            waiting[name].clear()
            if name not in ended:
                return
            folders[name].flush()  # its lines held for their ranks' copies, drawn while it is first
            head[0] += 1

    def draw(folded: Folded) -> None:
        line = folded.line
        if line.event and line.event.severity == Severity.FATAL:  # every --only shows it; copies once
            fatal[line.host] = fatal.get(line.host, 0) + 1
        if as_json:
            try:
                sys.stdout.write(json.dumps({
                    "host": line.host, "time": line.time, "text": line.text,
                    "class": str(line.event.log_class) if line.event else None,
                    "severity": str(line.event.severity) if line.event else None,
                    "remedy": line.event.remedy if line.event else None,
                    "explanation": line.event.explanation if line.event else None,
                    "rule": line.event.rule if line.event else None,
                    "source": line.event.source if line.event else None,
                    "count": folded.count, "ranks": folded.ranks, "boot": line.boot}) + "\n")
                sys.stdout.flush()
            except BrokenPipeError:  # the reader went away (| head): stop quietly
                stop.set()
            return
        when = clock(line.time, zone=True)  # a host's clock in another zone than this machine's says its offset
        lead = f"[dim]{line.host:<{width}} {when}[/]"
        if line.boot:  # journalctl's mark, said as what it means: it was left out, and a power cut read as a restart
            console.print(f"[dim]{line.host:<{width}} {'':{len(when)}}[/] [bold]-- Boot {escape(line.boot)} --: "
                          "the host started again here (a reboot or a power cut)[/]", soft_wrap=True, highlight=False)
            return
        pad = f"[dim]{'':<{width + 1 + len(when)}}[/]"
        times = f" [dim]\\[x{folded.count}: {escape(_ranks(folded.ranks))}][/]" if folded.count > 1 else ""
        if line.event:
            style = _STYLE[line.event.severity]
            said = (line.event.log_class, line.event.severity, line.event.explanation, line.event.source,
                    line.event.remedy)
            again = explained.get(line.host) == said  # the autotuner's 8 tactics: its remedy said 8 times, 24 lines
            explained[line.host] = said
            console.print(f"{lead} [{style}]>> {line.event.log_class} "
                          f"({line.event.severity}): {'as above' if again else escape(line.event.explanation)}[/]\n"
                          f"{pad} [{style}]   {escape(on_screen(line.text))}[/]{times}"
                          + (f"\n{pad}    from: {escape(line.event.source)}" if line.event.source and not again
                             else "")
                          + (f"\n{pad}    next: {escape(here(line.event.remedy, line.host, line.time))}"
                             if line.event.remedy and not again
                             else ""), soft_wrap=True, highlight=False)
        else:
            console.print(f"{lead} {escape(on_screen(line.text))}{times}", soft_wrap=True, highlight=False)

    folders = {h.name: RankFolder(shown) for h in hosts}

    errors: dict[str, str] = {}
    unsaid: list[str] = []  # errors not yet on stderr: with -f each is said at once, as the others go on
    from fleet.cli import say_host_error, say_on_stderr

    def say_errors() -> None:
        for message in unsaid:
            if as_json:
                sys.stderr.write(f"error: {message}\n")
            else:
                say_host_error(message, to=err)  # a sentence: folded to the terminal
        unsaid.clear()

    heard: set[str] = set()  # hosts whose journal gave at least one line
    asides: list[str] = []  # journalctl's own warnings (a journal file it skipped): said on stderr at the end

    def say_asides() -> None:
        for aside in asides:  # a journal file journalctl skipped (a power cut left it truncated) is a hole
            say_on_stderr(aside)
        asides.clear()

    def counted(line: LogLine) -> None:
        with lock:
            if line.aside:  # journalctl's warning: on stderr, never a line of the unit; with -f at once
                asides.append(f"{line.host}: journalctl said: {visible(line.text, lines=False)}")
                if follow:
                    say_asides()
                return
            heard.add(line.host)
            folders[line.host].add(line)

    ended: set[str] = set()  # hosts whose read is over: a join that Ctrl-C interrupted leaves is_alive() False
    # for a thread still reading (CPython 3.11's bpo-45274 handling marks it stopped)

    def one(host: Host) -> None:
        try:
            read(host, opts, follow, since, counted, stop, lines if last_shown is None else None)
        except Exception as exc:  # one host's failure must not end the others' streams
            with lock:
                errors[host.name] = str(exc) if isinstance(exc, FleetError) else f"{host.name}: {exc}"
                unsaid.append(errors[host.name])
                if follow:  # a followed stream never ends: the host that gave none is named now, not never
                    say_errors()
        finally:
            ended.add(host.name)

    # Plain threads, not a pool: Ctrl-C must set `stop` before anything waits for the streams to end.
    threads = [threading.Thread(target=one, args=(h,), daemon=True) for h in hosts]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
            with lock:  # a rank's line waits a moment for its copies, no longer
                for folder in folders.values():
                    folder.expire()
                advance()
        with lock:
            advance()
            for folder in folders.values():
                folder.flush()
            for host in hosts:
                for folded in kept[host.name]:
                    draw(folded)
    except KeyboardInterrupt:
        reading = [h.name for h in hosts if h.name not in ended]  # not is_alive(): see one()
        stop.set()
        end = time.monotonic() + 5  # in all: a wedged host's thread each waited 5 s, one after the other
        for t in threads:
            t.join(timeout=max(0.0, end - time.monotonic()))
        with lock:  # a line held for its ranks' copies is shown, not dropped
            for folder in folders.values():
                folder.flush()
            for host in hosts:  # what the hosts after the first one still read had said, in their order
                for folded in waiting[host.name]:
                    draw(folded)
            if not follow:  # --only with -n: the last N kept so far
                for host in hosts:
                    for folded in kept[host.name]:
                        draw(folded)
            say_errors()
            say_asides()
        if not follow:  # -f ends so by design; a read cut short said nothing, its lines looking whole
            say_on_stderr("interrupted (Ctrl-C): the journal lines read are shown" + (
                f"; not read to the end: {', '.join(reading)}" if reading else ""))
        return 130
    say_errors()
    say_asides()
    silent = [h.name for h in hosts if h.name not in heard and h.name not in errors]
    if silent:  # journalctl's "-- No entries --" is no log line: said once, here
        say_on_stderr("no journal lines" + (f" since {since}" if since else "") + ": " + ", ".join(silent)
                      + today_only(since))
    if fatal:

        say_on_stderr("fatal lines (exit 1): " + ", ".join(f"{host}: {n}" for host, n in sorted(fatal.items())))
    return 1 if errors or fatal else 0


def _ranks(ranks: list[str]) -> str:
    """'TP0-TP7' for a run of one kind of rank, 'pids 342-349' for processes, else the names."""
    if all(r.startswith("pid ") for r in ranks):
        pids = sorted(int(r[4:]) for r in ranks)
        run = len(pids) > 2 and pids == list(range(pids[0], pids[-1] + 1))
        return f"pids {pids[0]}-{pids[-1]}" if run else "pids " + " ".join(map(str, pids))
    nums = [int(r[2:]) for r in ranks if len(r) > 2 and r[:2].isalpha() and r[2:].isdigit()]
    kinds = {r[:2] for r in ranks}
    if len(nums) == len(ranks) > 2 and len(kinds) == 1 and sorted(nums) == list(range(min(nums), max(nums) + 1)):
        kind = next(iter(kinds))
        return f"{kind}{min(nums)}-{kind}{max(nums)}"
    return " ".join(sorted(ranks, key=lambda r: (r[:2], int(r[2:]) if r[2:].isdigit() else -1, r)))


_TIME_ALONE = re.compile(r"\d\d:\d\d(:\d\d)?(?: \S+)?")


def today_only(since: str | None, now: datetime | None = None) -> str:
    """A time alone is today's on the host's clock, as journalctl reads it: at 3 a.m. `--since 23:00` meant last
    night and read as `no journal lines since 23:00`, a quiet server. Said beside it, with yesterday's spelling."""
    if not since or not _TIME_ALONE.fullmatch(since.strip()):
        return ""
    day = (now or datetime.now()).date() - timedelta(days=1)
    return (f" ({since.strip()} alone is today's on each host's clock, as journalctl reads it: a time still ahead "
            f"there has no lines yet; yesterday's is '{day.isoformat()} {since.strip()}')")

