"""`inv logs`: the sglang unit's journal from a host, each line classified live with the logwatch rules."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from fabric import Connection

from fleet.errors import FleetError, InputError
from fleet.host.releases import ReleaseStore, recorded_flashinfer, recorded_sglang
from fleet.host.render import unit_of_files
from fleet.host.session import CommandTimedOut
from fleet.inventory import Host
from fleet.logs import bysite, journal
from fleet.logs.classify import Event
from fleet.logs.remedies import spell
from fleet.logs.watch import LogWatcher
from fleet.outcomes import Outcome, ServerVerdict
from fleet.ssh.connect import ConnectOptions, open_connection

READ_ALL_S = 300.0  # without -f: the longest a host's journal may send no line before its end (journalctl ends on
# its own); a journal still sending lines is read to its end, however long (a busy server's, millions of lines: a
# deadline on the whole read gave up before the latest lines, which `--only fatal` was asked for)
# systemd.time's spellings ('m' minutes, 'M' months)
_UNITS = r"(?:s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?|d|days?|w|weeks?|M|months?|y|years?)"
# fleet's own span back from now, without journalctl's '-': one part or several, fractions too ('2h', '1h30m', '1.5h';
# '1h30m' and '1.5h' were refused while '2h' and '-1h30m' were taken)
_SPAN = re.compile(rf"-?(?:\d+(?:\.\d+)?{_UNITS})+")
_PART = rf"\d+(?:\.\d+)? ?{_UNITS}"  # one part of journalctl's span: '1.5h', '30 min'
_AGO = re.compile(rf"(?:((?:{_PART} ?)+) ago|-((?:{_PART})+))")  # its own: '10 min ago', '-2hours', '1h 30min ago'
_EPOCH = re.compile(r"@\d{1,12}")
_ISO_T = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d{1,6})?)?(?:Z|[+-]\d\d:?\d\d)?")
_AT = re.compile(r"(\d{4}-\d\d-\d\d)?(?:(?:^| )\d\d:\d\d(:\d\d)?)?")  # date, time, or both
# the zone as a host prints it (UTC, CET, EEST) or a tz database name (Europe/Berlin): the host's journalctl judges it
_ZONE = r"[A-Z]{2,5}|[A-Z][A-Za-z_]+/[A-Za-z_+-]+(?:/[A-Za-z_+-]+)?"
# as systemctl status and journalctl print a time: 'Sun 2026-12-06 00:29:15.123 UTC' (the weekday with a date)
_STAMP = re.compile(r"(?:(?P<day>mon|tue|wed|thu|fri|sat|sun)(?:day|sday|nesday|rsday|urday)? (?=\d{4}-))?(?P<at>.+?)"
                    rf"(?:(?<=\d\d:\d\d:\d\d)\.\d{{1,6}})?(?: (?:{_ZONE}))?", re.IGNORECASE)
_WORDS = ("today", "yesterday", "now")
# a line's time as `inv logs` prints it (fleet.cli.logs.clock): '12-06 15:37:01', '12-06 05:01:13+0900'
_SHOWN = re.compile(r"(?P<md>\d\d-\d\d) (?P<hm>\d\d:\d\d)(?P<s>:\d\d)?(?P<off>[+-]\d{4})?")
_COMMA_MS = re.compile(r"(?<=\d\d:\d\d:\d\d),(?=\d{1,6}$)")  # python logging's '15:37:02,851', in sglang's lines
MAX_LINES = 1_000_000


@dataclass
class LogLine:
    host: str
    time: str | None
    text: str
    event: Event | None
    process: str | None = None  # the journal's 'python[342]': each rank is a process of its own (fleet.logs.ranks)
    boot: str | None = None  # journalctl's `-- Boot <id> --` between two boots' lines: this id, the next boot's
    aside: bool = False  # journalctl's own words on its stderr (a journal file it skipped): no line of the unit


def check_since(since: str | None, now: datetime | None = None) -> str | None:
    """--since as journalctl takes it on the host (its clock and time zone): a span back from now (10m, 2h, 1d,
    -30s, and journalctl's '10 min ago', '-2hours', '1h 30min ago', '-1.5h'), seconds since the epoch (@1764968400),
    a time today (20:00, 20:00:15), a date (2026-12-05), both ('2026-12-05 20:00'; as systemctl status prints one,
    'Sun 2026-12-06 00:29:15.123 UTC', too), or today, yesterday, now, or a line's time as `inv logs` prints it
    ('12-06 15:37:01'); the value for journalctl's --since. Anything else is InputError before any host is contacted
    (what journalctl still refuses is the host's error)."""
    if since is None:
        return None
    since = _COMMA_MS.sub(".", since.strip())
    if (shown := _SHOWN.fullmatch(since)) and (copied := _shown_time(shown, now or datetime.now())):
        return copied
    if _SPAN.fullmatch(since):
        return since if since.startswith("-") else f"-{since}"
    stamp = _STAMP.fullmatch(since)
    if since in _WORDS or _EPOCH.fullmatch(since) or (stamp and _AT.fullmatch(stamp["at"]) and _real(stamp["at"])
                                                      and _weekday(stamp["day"], stamp["at"])):
        return since
    ago = _AGO.fullmatch(since)
    if ago:
        return "-" + (ago.group(1) or ago.group(2)).replace(" ", "")
    if _ISO_T.fullmatch(since):  # ISO 8601, as `inv logs --json` writes a line's time: journalctl 252 refuses the T
        try:
            at = datetime.fromisoformat(since)
        except ValueError:
            at = None
        if at is not None:  # with its offset: that moment whatever the host's zone; without: the host's clock
            return f"@{int(at.timestamp())}" if at.tzinfo else at.strftime("%Y-%m-%d %H:%M:%S")
    raise InputError(f"--since {since}: use a span (30s, 10m, 2h, 1d, '10 min ago'), a time on the host's clock "
                     "(20:00, 20:00:15), a date (2026-12-05), both ('2026-12-05 20:00', or as systemctl status "
                     "prints it: 'Sun 2026-12-06 00:29:15 UTC'), a line's time as inv logs prints it "
                     "('12-06 20:00:15'), today or yesterday")


def _shown_time(shown: re.Match[str], now: datetime) -> str | None:
    """'12-06 15:37:01' as `inv logs` prints a line's time (copied back to read from that line on: it was refused):
    this year's date, last year's for a day still ahead, on the host's clock; with its offset, that moment."""
    clock = f"{shown['hm']}{shown['s'] or ':00'}"
    try:
        at = datetime.strptime(f"{now.year}-{shown['md']} {clock}", "%Y-%m-%d %H:%M:%S")
        if at.date() > now.date() + timedelta(days=1):
            at = at.replace(year=now.year - 1)
        if offset := shown["off"]:
            moment = datetime.strptime(f"{at:%Y-%m-%d %H:%M:%S}{offset}", "%Y-%m-%d %H:%M:%S%z")
            return f"@{int(moment.timestamp())}"
    except ValueError:  # 02-30, 25:00: refused below with the forms it takes
        return None
    return f"{at:%Y-%m-%d %H:%M:%S}"


def _real(at: str) -> bool:
    """A date and time of the calendar and the clock (journalctl refuses 25:00 and 2026-13-45 on the host, and
    fleet showed nothing, exit 0)."""
    date, _, clock = at.rpartition(" ") if " " in at else (("", "", at) if ":" in at else (at, "", ""))
    try:
        if date:
            datetime.strptime(date, "%Y-%m-%d")
        if clock:
            datetime.strptime(clock, "%H:%M:%S" if clock.count(":") == 2 else "%H:%M")
    except ValueError:
        return False
    return True


def _weekday(day: str | None, at: str) -> bool:
    """journalctl refuses a weekday its date does not fall on ('Mon 2026-12-06')."""
    return day is None or datetime.strptime(at[:10], "%Y-%m-%d").strftime("%a").lower() == day[:3].lower()


def check_lines(lines: int | str | None) -> int | None:
    """-n/--lines as a count (the command line gives text); `all` is journalctl's no limit (None); InputError for
    anything else but 1..MAX_LINES."""
    if lines is None or str(lines).strip().lower() == "all":
        return None
    text = str(lines).strip()
    if not text.isdigit() or not 0 <= int(text) <= MAX_LINES:  # 0: with -f, only what comes (tail -n 0 -f)
        raise InputError(f"--lines {lines}: give a number of lines from 0 to {MAX_LINES:,}, or all")
    return int(text)


def journal_command(unit: str, follow: bool, since: str | None, lines: int | str | None = None) -> str:
    return journal.command(unit, output="short-iso", since=check_since(since), follow=follow,
                           lines=check_lines(lines))


# journalctl's own lines, never the unit's (a unit's line has its time first): its mark where a journal spans a
# reboot, and what it prints when the span holds no entry (a --since still ahead, a unit that never logged)
_SEPARATOR = re.compile(r"^-- (Boot (?P<boot>[0-9a-f]{32})|No entries) --$")


def is_separator(line: str) -> bool:
    """journalctl's mark between two boots' lines, or its word that there is none: not the unit's line (no time,
    nothing to classify)."""
    return bool(_SEPARATOR.match(line))


def boot_of(line: str) -> str | None:
    """The next boot's id where the line is journalctl's mark between two boots (`-- Boot <id> --`), else None."""
    m = _SEPARATOR.match(line)
    return m["boot"] if m else None


def split_time(line: str) -> tuple[str | None, str]:
    """`2026-11-30T13:05:39+0000 host proc[pid]: text` -> (time, text)."""
    when, _, text = split_line(line)
    return when, text


def split_line(line: str) -> tuple[str | None, str | None, str]:
    """`2026-11-30T13:05:39+0000 host proc[pid]: text` -> (time, 'proc[pid]', text)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) \S+ ([^:]+): (.*)$", line)
    return (m.group(1), m.group(2), m.group(3)) if m else (None, None, line)


def _serving(conn: Connection, host: Host) -> tuple[str | None, str | None, str]:
    """The sglang and flashinfer versions the host's current release was deployed on (its recorded facts; None when
    unknown or unreadable: the rules alone classify then, as before), and the unit it serves from: its playbook's
    serve.unit wins over the inventory's `unit` (a journal read from the inventory's said `no journal lines`)."""
    try:
        release = ReleaseStore(conn, host).current()
    except FleetError:
        return None, None, host.unit
    if release is None:
        return None, None, host.unit
    unit = unit_of_files(release.files) or host.unit
    return recorded_sglang(release.facts), recorded_flashinfer(release.facts), unit


def spelled(event: Event, sglang: str | None) -> Event:
    """The event with its remedy naming flags as the host's sglang spells them (0.5.20+: --cuda-graph-max-bs-decode)."""
    if sglang is None or not event.remedy:
        return event
    remedy = spell(event.remedy, sglang)
    return event if remedy == event.remedy else dataclasses.replace(event, remedy=remedy)


HOLD_S = 2.0  # the longest a line waits for its class: a fatal line a stalled server wrote last is still shown


class _Held:
    """A host's journal lines, each emitted once the classifier has decided it, with its event: one record per line
    (a traceback's event comes lines after the line it names, which waits for it till then, HOLD_S at most: an
    event decided later comes as a record of its own)."""

    def __init__(self, emit: Callable[[LogLine], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.emit = emit
        self.clock = clock
        self.lines: OrderedDict[int, tuple[LogLine, float]] = OrderedDict()  # by the classifier's 1-based line
        # number: the line and when it was read
        self.read = 0

    def add(self, line: LogLine | None) -> None:
        """The next line the classifier is fed (None: journalctl's own, counted by it but never shown)."""
        self.read += 1
        if line is not None:
            self.lines[self.read] = (line, self.clock())

    def classified(self, event: Event, host: str) -> None:
        """The event on the line it names; the more severe where a line has two."""
        held = self.lines.get(event.line)
        if held is None:  # already shown (after HOLD_S): shown on its own
            self.emit(LogLine(host, None, event.text, event))
            return
        line, read_at = held
        if line.event is None or event.severity.rank > line.event.severity.rank:
            self.lines[event.line] = (dataclasses.replace(line, event=event), read_at)

    def release(self, undecided_from: int | None) -> None:
        """Every line before `undecided_from` (None: every line), and any held HOLD_S, emitted, in order."""
        stale = self.clock() - HOLD_S
        while self.lines:
            number, (line, read_at) = next(iter(self.lines.items()))
            if undecided_from is not None and number >= undecided_from and read_at > stale:
                break
            self.lines.popitem(last=False)
            self.emit(line)


def stream(host: Host, opts: ConnectOptions, follow: bool, since: str | None, emit: Callable[[LogLine], None],
           stop: threading.Event, lines: int | str | None = None) -> None:
    """The unit's journal on `host`, read by `read_lines`, until it ends or `stop`. Without `follow`, a journal that
    has not ended after READ_ALL_S is CommandTimedOut (a host that never ends it)."""
    conn = open_connection(host, opts)
    try:
        sglang, flashinfer, unit = _serving(conn, host)
        source = journal.Follower(conn, host, journal_command(unit, follow, since, lines))
        read = _Tally()
        verdict = read_lines(source, host.name, read.counting(emit), stop, None if follow else READ_ALL_S,
                             sglang, flashinfer)
        for said in getattr(source, "said", ()):  # journalctl's warnings (a file it skipped: a hole in what was shown)
            emit(LogLine(host.name, None, said, None, aside=True))
        if verdict is not None and verdict[0] == Outcome.HANG:
            raise CommandTimedOut(f"{host.name}: the journal sent no line for {READ_ALL_S:g}s before its end "
                                  f"(without -f, journalctl ends on its own){read.so_far()}: stopped reading it")
    finally:
        conn.close()


class _Tally:
    """The lines a host's journal gave, and the host's time of the last: how far a read got."""

    def __init__(self) -> None:
        self.lines: int = 0
        self.last: str | None = None

    def counting(self, emit: Callable[[LogLine], None]) -> Callable[[LogLine], None]:
        def counted(line: LogLine) -> None:
            self.lines += 1
            self.last = line.time or self.last
            emit(line)
        return counted

    def so_far(self) -> str:
        if not self.lines:
            return "; no line read"
        return f"; {self.lines:,} line{'s' if self.lines > 1 else ''} read" + (f", the last of {self.last}"
                                                                            if self.last else "")


def read_lines(source: journal.Source, host: str, emit: Callable[[LogLine], None], stop: threading.Event,
               quiet_s: float | None = None, sglang: str | None = None, flashinfer: str | None = None,
               clock: Callable[[], float] = time.monotonic) -> ServerVerdict | None:
    """A journal's lines, each emitted once its class is decided (at once for most; a traceback's lines wait for
    the line that closes it, the journal's end, or HOLD_S) with its event: one LogLine per line; journalctl's mark
    between two boots is one too (`boot`: the host started again there, a reboot or a power cut). Until `source`
    ends (None), `stop` (STOPPED) or `quiet_s` seconds without a line (HANG); what was read is emitted whatever
    happens."""
    held = _Held(emit, clock)
    heard = [time.monotonic()]

    def line(raw: str) -> str:
        heard[0] = time.monotonic()
        if is_separator(raw):
            boot = boot_of(raw)  # `-- No entries --` is no line; a boot's mark is where the host started again
            held.add(LogLine(host, None, raw, None, boot=boot) if boot else None)
            return ""
        when, process, text = split_line(raw)
        held.add(LogLine(host, when, text, None, process))
        return text

    watcher = LogWatcher(on_event=lambda e: held.classified(spelled(e, sglang), host), on_line=line,
                         raise_on_fatal=False, sites=bysite.for_release(sglang, flashinfer))

    news: Callable[[], list[str]] = getattr(source, "news", list)

    def tick() -> ServerVerdict | None:
        held.release(watcher.undecided_from)
        for said in news():  # journalctl's warnings while it runs (-f: it never ends)
            emit(LogLine(host, None, said, None, aside=True))
        if quiet_s is not None and time.monotonic() - heard[0] > quiet_s:
            return Outcome.HANG, "deadline"
        return (Outcome.STOPPED, "stopped") if stop.is_set() else None

    try:
        verdict = journal.follow(source, watcher, tick)
        if verdict is None or verdict[0] != Outcome.HANG:
            watcher.finish()
        return verdict
    finally:
        held.release(None)  # what was read is shown, decided or not (a link that dropped mid-traceback)
