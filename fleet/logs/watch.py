"""Log classification, live: LogWatcher, an Invoke StreamWatcher that classifies each complete journal line
exactly once as it arrives, keeps the events for the verdict, and raises FatalLogLine on the first fatal
class (or ServerReady on READY, when asked to stop there).

fleet.logs.journal owns the `journalctl -f` channel and feeds this watcher (deploy's startup watch, `inv
logs`); nothing here runs a command. The pure parts (rules, normalising, classify_line, classify_text, the
verdict) live in fleet.logs.rules, .normalise and .classify; they are re-exported here as one surface.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from invoke.exceptions import WatcherError
from invoke.watchers import StreamWatcher

from fleet.logs.bysite import SiteClassifier
from fleet.logs.classify import (
    NONE,
    Event,
    LineClassifier,
    LineMatch,
    LogVerdict,
    classify_line,
    classify_text,
    decide,
)
from fleet.logs.normalise import Line, normalise
from fleet.logs.rules import LogClass, Rule, RuleFileError, RuleSet, Severity, default_rules, load_rules

__all__ = [
    "NONE", "Event", "FatalLogLine", "Line", "LineClassifier", "LineMatch", "LogClass", "LogWatcher",
    "Rule", "RuleFileError", "RuleSet", "ServerReady", "Severity", "LogVerdict", "classify_line",
    "classify_text", "decide", "default_rules", "load_rules", "normalise",
]


class FatalLogLine(WatcherError):
    """A fatal class appeared in the stream; `event` says which line and why."""

    def __init__(self, event: Event) -> None:
        super().__init__(f"line {event.line}: {event.log_class}: {event.explanation}: {event.text}")
        self.event = event


class ServerReady(WatcherError):
    """The server said it is ready (raised only with stop_on_ready, to end a `journalctl -f`)."""

    def __init__(self, event: Event) -> None:
        super().__init__(f"line {event.line}: {event.text}")
        self.event = event


@dataclass
class _Cursor:
    """How far one stream has been read; Invoke reads each stream in its own thread."""

    classifier: LineClassifier
    offset: int = 0
    tail: str = ""  # the partial last line, classified by finish() if its newline never comes

    def waits_on(self, tail: str) -> None:
        """A partial last line, waiting for its newline."""
        self.tail = tail

    def read_to(self, offset: int) -> None:
        self.offset = offset

    def dropped(self, chars: int) -> None:
        """The caller dropped the first `chars` characters of its stream (all of them read)."""
        self.offset -= chars

    def drained(self) -> None:
        """The partial last line, classified all the same at the stream's end."""
        self.offset, self.tail = self.offset + len(self.tail), ""


# events kept for the verdict; past it only fatal ones, as many again (`inv logs -f` of a host flooding for days)
MAX_EVENTS = 10_000


@dataclass
class _Shared:
    rules: RuleSet
    on_event: Callable[[Event], None] | None
    stop_on_ready: bool
    on_line: Callable[[str], str] | None = None  # sees each complete line first; returns the text to classify
    sites: SiteClassifier | None = None  # the host's release's sites behind the rules
    raise_on_fatal: bool = True  # False: a reader that only reports (inv logs) goes on past a fatal line
    max_events: int = MAX_EVENTS  # events kept (fatal ones up to twice as many); every one still goes to on_event
    lock: threading.RLock = field(default_factory=threading.RLock)  # a callback may read .events
    cursors: list[_Cursor] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    fatal: Event | None = None

    def fatal_seen(self, event: Event) -> None:
        """A fatal event: the first one stays the stream's."""
        self.fatal = self.fatal or event


class LogWatcher(StreamWatcher):
    """Classifies each complete line of the watched stream(s) exactly once, as it arrives.

    Keeps the events, calls `on_event(event)` for each (from the reader thread, at once), sets `ready`
    on READY and raises FatalLogLine on the first fatal event. Warnings never raise. Use one watcher per
    command. Run with pty=True: without a pty, Invoke first joins the idle stderr reader (up to 1 s)
    before it raises Failure; the callback is not delayed either way.
    """

    # StreamWatcher is a threading.local, and Invoke re-runs __init__ in each reader thread: slots are
    # the one place shared by all threads, so the events the caller reads live there.
    __slots__ = ("_shared",)

    def __init__(self, rules: RuleSet | None = None, on_event: Callable[[Event], None] | None = None,
                 *, stop_on_ready: bool = False, on_line: Callable[[str], str] | None = None,
                 raise_on_fatal: bool = True, sites: SiteClassifier | None = None,
                 max_events: int = MAX_EVENTS) -> None:
        super().__init__()
        if not hasattr(self, "_shared"):  # an unset slot: the first thread, the one that built us
            self._shared = _Shared(rules if rules is not None else default_rules(), on_event, stop_on_ready,
                                   on_line, sites, raise_on_fatal, max_events)

    def submit(self, stream: str) -> list[str]:
        """Invoke passes everything read so far; classify the complete lines not seen yet."""
        cursor = self._cursor()
        while True:
            end = stream.find("\n", cursor.offset)
            if end < 0:
                cursor.waits_on(stream[cursor.offset:])
                return []  # a partial last line waits for its newline
            line = stream[cursor.offset:end]
            cursor.read_to(end + 1)  # advance first: after a raise, the next submit starts at the next line
            if self._shared.on_line is not None:
                line = self._shared.on_line(line)
            self._record(cursor.classifier.feed(line))

    def forget(self, chars: int) -> None:
        """The caller dropped the first `chars` characters of the stream it submits (all of them read): a
        follower that runs for days keeps only what is not classified yet."""
        cursor = self._cursor()
        if chars > cursor.offset:
            raise ValueError(f"forget({chars}): only {cursor.offset} characters were read")
        cursor.dropped(chars)

    def _cursor(self) -> _Cursor:
        cursor: _Cursor | None = getattr(self, "_stream_cursor", None)  # thread-local, as all but slots
        if cursor is None:
            cursor = self._stream_cursor = _Cursor(LineClassifier(self._shared.rules, self._shared.sites))
            with self._shared.lock:
                self._shared.cursors.append(cursor)  # so that finish() can reach every stream
        return cursor

    def finish(self) -> list[Event]:
        """The stream ended: classify what is still pending (a traceback, a last line without newline).

        Does not raise; look at `fatal` or `verdict()`.
        """
        shared = self._shared
        new: list[Event] = []
        for cursor in list(shared.cursors):
            if cursor.tail:
                new.extend(cursor.classifier.feed(cursor.tail))
                cursor.drained()
            new.extend(cursor.classifier.flush())
        self._record(new, raise_fatal=False)
        return new

    @property
    def events(self) -> list[Event]:
        with self._shared.lock:
            return list(self._shared.events)

    @property
    def lines_read(self) -> int:
        """Lines classified so far, over all streams."""
        with self._shared.lock:
            return sum(c.classifier.lines_read for c in self._shared.cursors)

    @property
    def undecided_from(self) -> int | None:
        """The first line (over all streams) whose class may still come; None: every line read is decided."""
        with self._shared.lock:
            open_ = [n for c in self._shared.cursors if (n := c.classifier.undecided_from) is not None]
        return min(open_) if open_ else None

    @property
    def ready(self) -> threading.Event:
        return self._shared.ready

    @property
    def fatal(self) -> Event | None:
        return self._shared.fatal

    def verdict(self) -> LogVerdict:
        return decide(self.events)

    def _record(self, new: list[Event], raise_fatal: bool = True) -> None:
        if not new:
            return
        shared = self._shared
        first_fatal: Event | None = None
        ready: Event | None = None
        with shared.lock:  # callbacks run in order, one at a time, across both reader threads
            for event in new:
                kept = len(shared.events)
                cap = shared.max_events
                if kept < cap or (event.severity is Severity.FATAL and kept < 2 * cap):
                    shared.events.append(event)
                if shared.on_event is not None:
                    shared.on_event(event)
                if event.severity is Severity.FATAL and first_fatal is None:
                    first_fatal = event
                    shared.fatal_seen(event)
                if event.log_class is LogClass.READY:
                    ready = event
                    shared.ready.set()
        if first_fatal is not None and raise_fatal and shared.raise_on_fatal:
            raise FatalLogLine(first_fatal)
        if ready is not None and shared.stop_on_ready and raise_fatal:
            raise ServerReady(ready)
