"""Classifying log text: lines to events (one event per traceback or multi-line message), events to a verdict.

Everything here is pure: text in, data out. Given a SiteClassifier (the release's site index), a line only a
catch-all rule matches is classified by the site that printed it, and every event says where it comes from.
The live watcher (fleet/logs/watch.py) feeds the same LineClassifier one line at a time, so a file and a live
journal classify identically.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fleet.logs.bysite import SiteClassifier
from fleet.logs.normalise import Line, normalise
from fleet.logs.rules import LogClass, Rule, RuleSet, Severity, default_rules
from fleet.upstream.siteindex import IndexedSite
from fleet.yamlfile import JsonObject

NONE = "NONE"  # the verdict when no line says anything

_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
_CHAIN = re.compile(r"\s*(?:During handling of the above exception|The above exception was the direct cause)")
# Lines that continue whatever came before: frames (Python, C++, c10), indented code, carets.
_STRUCTURAL = re.compile(r"\s|\d+\s+0x[0-9a-fA-F]+\s|frame #\d+:|Exception raised from |\.\.\.\s*$")
_MAX_GROUP_LINES = 400  # a runaway message must not hold its event back forever


@dataclass(frozen=True, slots=True)
class Event:
    """One thing the log says: a class, how bad it is, and the line that says so."""

    line: int  # 1-based line of the evidence: the line that decided the class
    first_line: int  # where the traceback or message began (== line for one-line events)
    log_class: LogClass
    severity: Severity
    text: str  # the evidence line, normalised
    rule: str
    priority: int
    explanation: str
    remedies: tuple[str, ...]
    remedy: str | None = None  # the rule's next thing for a person to try
    site: IndexedSite | None = None  # the raise / log site in the host's release that printed the line
    consequence: bool = False  # the line follows another failure: an earlier specific fatal one decides

    @property
    def source(self) -> str | None:
        """'sglang 0.5.23 srt/mem_cache/allocation.py:344 (alloc_req_slots)', when the site is known."""
        return self.site.where() if self.site is not None else None

    def to_json(self) -> JsonObject:
        return {"line": self.line, "first_line": self.first_line, "class": str(self.log_class),
                "severity": str(self.severity), "text": self.text, "rule": self.rule,
                "explanation": self.explanation, "remedy": self.remedy, "remedies": list(self.remedies),
                "source": self.source, "site": self.site.to_json() if self.site is not None else None}


@dataclass(frozen=True, slots=True)
class LogVerdict:
    """What decides deploy's next step: the most specific fatal, else READY, else the worst warning."""

    log_class: str  # a LogClass, or NONE
    event: Event | None
    events: tuple[Event, ...]
    follows: Event | None = None  # the consequence (a peer gone, an abort) whose cause `event` is, when one was

    @property
    def fatal(self) -> bool:
        return self.event is not None and self.event.severity is Severity.FATAL

    @property
    def ready(self) -> bool:
        return self.log_class == LogClass.READY

    def to_json(self) -> JsonObject:
        out = {"verdict": self.log_class, "fatal": self.fatal,
               "decided_by": self.event.to_json() if self.event is not None else None,
               "events": [e.to_json() for e in self.events]}
        if self.follows is not None:  # the line the decided cause explains
            out["consequence"] = self.follows.to_json()
        return out


@dataclass(frozen=True, slots=True)
class _Hit:
    rule: Rule
    line: int
    text: str
    in_frames: bool = False  # matched a traceback's source line: weaker evidence than its message
    site: IndexedSite | None = None


@dataclass(slots=True)
class _Group:
    """An open multi-line event: a traceback, or a message whose next lines may name its cause."""

    first: int
    severity: Severity
    state: str  # "frames" (inside a traceback's frames), "message", "chain" (between chained tracebacks)
    best: _Hit | None = None
    reported: _Hit | None = None
    size: int = 0

    def takes(self, text: str) -> None:
        """One more line: where in a traceback the group is now."""
        self.size += 1
        if _CHAIN.match(text):
            self.state = "chain"
        elif _TRACEBACK.search(text):
            self.state = "frames"
        elif self.state == "frames" and text and not text[0].isspace() and self.size > 1:
            self.state = "message"  # the exception line closes the frames

    def weighs(self, hit: _Hit) -> None:
        """A line a rule matched: the group's best cause so far."""
        if _better(hit, self.best):
            self.best = hit

    def reports(self, hit: _Hit) -> None:
        """Its cause, reported now: its tail is read silently."""
        self.reported = hit


@dataclass(frozen=True, slots=True)
class LineMatch:
    rule: Rule  # the most specific rule: it names the class
    severity: Severity  # the rule's severity, or that of the wrapper reporting it (the autotuner)
    conclusive: bool  # a fatal cause, not a wrapper still waiting for one
    site: IndexedSite | None = None  # when the class came from the site that printed the line


CATCH_ALL_PRIORITY = 14  # FATAL rules at or below it only say that something failed (a traceback, an exception)
# Rules at or below it know a line by its shape alone (an exception; one that names a flag): when the site that
# raised it is found, the site's class, read from what its message means, is the better answer.
BY_SHAPE_PRIORITY = 16


def classify_line(text: str, rules: RuleSet | None = None, sites: SiteClassifier | None = None) -> LineMatch | None:
    """The class and severity one line carries on its own, or None for a normal line."""
    return _match(normalise(text).text, rules if rules is not None else default_rules(), sites)


def _match(text: str, rules: RuleSet, sites: SiteClassifier | None = None) -> LineMatch | None:
    found = rules.best(text)
    if found is None:
        # no rule: a line a logger.error site printed may still name its class (a warning at most)
        logged = sites.classify_logged(text) if sites is not None else None
        if logged is None:
            return None
        return LineMatch(logged[0], logged[0].severity, False, logged[1])
    best, wrapper = found
    if best.consequence:  # a consequence's line that states its cause: the cause names it, as an earlier line would
        best = rules.cause(text) or best
    severity = wrapper.severity if wrapper is not None else best.severity
    if sites is not None and best.priority <= BY_SHAPE_PRIORITY and severity is Severity.FATAL:
        # only a catch-all or a rule by the line's shape matched: the site that raised it may name the class
        by_site, abstains = sites.judge(text)
        if by_site is not None:
            rule = by_site[0]
            return LineMatch(rule, rule.severity, rule.severity is Severity.FATAL, by_site[1])
        if best.priority > CATCH_ALL_PRIORITY and abstains:
            # the site is found and its message names no class ("... requires SM>=80. Please use `--attention-backend
            # X`" names a flag only as advice; an entry abstains): a rule that knows the line by its shape alone (an
            # exception naming a flag) does not outrank what the site's classes read; the line stays the catch-all's
            generic = next((r for r in rules.rules if r.priority <= CATCH_ALL_PRIORITY and r.matches(text)), None)
            if generic is not None:
                best = generic
    return LineMatch(best, severity, severity is Severity.FATAL and not best.wraps)


class LineClassifier:
    """Feed lines one at a time; get events as soon as they are certain.

    A conclusive fatal line is reported at once. A traceback or a wrapper ("Capture cuda graph failed:",
    "Scheduler hit an exception:") is held until a specific cause shows up in its continuation lines
    (reported then) or the next record begins. Warnings own their structural continuation lines (frames),
    so a fatal-looking frame under an autotuner warning stays a warning.
    """

    def __init__(self, rules: RuleSet | None = None, sites: SiteClassifier | None = None) -> None:
        self._rules = rules if rules is not None else default_rules()
        self._sites = sites
        self._lineno = 0
        self._group: _Group | None = None

    @property
    def lines_read(self) -> int:
        return self._lineno

    @property
    def undecided_from(self) -> int | None:
        """The first line fed whose class may still come (an open traceback's or message's first); None: every
        line fed so far is decided."""
        return self._group.first if self._group is not None else None

    def feed(self, raw: str) -> list[Event]:
        self._lineno += 1
        line = normalise(raw)
        match = _match(line.text, self._rules, self._sites)
        out: list[Event] = []
        group = self._group
        if group is not None:
            if self._continues(group, line):
                self._absorb(group, line, match, out)
                return out
            out.extend(self._close())
        if _TRACEBACK.search(line.text):
            self._open(_Group(self._lineno, Severity.FATAL, "frames"), line, match, out)
        elif match is None:
            pass
        elif match.severity is Severity.INFO:
            out.append(self._event(_Hit(match.rule, self._lineno, line.text, site=match.site), self._lineno,
                                   match.severity))
        else:  # fatal and warning lines may go on over the next lines
            self._open(_Group(self._lineno, match.severity, "message"), line, match, out)
        return out

    def _open(self, group: _Group, line: Line, match: LineMatch | None, out: list[Event]) -> None:
        self._group = group
        self._absorb(group, line, match, out)

    def flush(self) -> list[Event]:
        """End of input: report what an open traceback or message amounts to."""
        return self._close()

    def _continues(self, group: _Group, line: Line) -> bool:
        text = line.text
        if not text.strip() or group.state == "frames" or _STRUCTURAL.match(text) or _CHAIN.match(text):
            return True  # up to its exception line, everything belongs to a traceback
        if group.state == "chain" and _TRACEBACK.search(text):
            return True
        # a warning owns only its frames; a fatal message also owns the unprefixed lines of its body
        return group.severity is Severity.FATAL and not line.header and not _TRACEBACK.search(text)

    def _absorb(self, group: _Group, line: Line, match: LineMatch | None, out: list[Event]) -> None:
        text = line.text
        group.takes(text)
        if match is not None:
            hit = _Hit(match.rule, self._lineno, text, in_frames=group.state == "frames" and group.size > 1,
                       site=match.site)
            if group.severity is Severity.FATAL and match.severity is not Severity.FATAL:
                if not hit.in_frames:  # a frame's source line is code, not a message
                    out.append(self._event(hit, self._lineno, match.severity))
            else:
                group.weighs(hit)
        best = group.best
        if (group.severity is Severity.FATAL and best is not None and not best.rule.wraps
                and group.state != "frames" and best is not group.reported):
            group.reports(best)  # a specific cause: report now, keep reading its tail silently
            out.append(self._event(best, group.first, Severity.FATAL))
        if group.size >= _MAX_GROUP_LINES:
            out.extend(self._close())

    def _close(self) -> list[Event]:
        group, self._group = self._group, None
        if group is None or group.best is None or group.best is group.reported:
            return []  # nothing, or nothing beyond the cause already reported
        return [self._event(group.best, group.first, group.severity)]

    def _event(self, hit: _Hit, first: int, severity: Severity) -> Event:
        rule = hit.rule
        site = hit.site
        if site is None and self._sites is not None and not hit.in_frames:
            site = self._sites.locate(hit.text)  # events are few: where each comes from is worth a lookup
        return Event(line=hit.line, first_line=first, log_class=rule.log_class, severity=severity,
                     text=hit.text.strip(), rule=rule.name, priority=rule.priority,
                     explanation=rule.explanation, remedies=rule.remedies, remedy=rule.remedy, site=site,
                     consequence=rule.consequence)


def _better(hit: _Hit, best: _Hit | None) -> bool:
    """A cause beats a consequence (the abort's `what():` naming the timeout behind it); then more specific wins;
    at equal specificity an exception's message beats the source line raising it."""
    if best is None:
        return True
    if _cause(hit.rule) and not hit.in_frames and best.rule.consequence:
        return True
    if hit.rule.consequence and _cause(best.rule) and not best.in_frames:
        return False
    if hit.rule.priority > best.rule.priority:
        return True
    return hit.rule.priority == best.rule.priority and best.in_frames and not hit.in_frames


def _cause(rule: Rule) -> bool:
    """A rule that names a cause of its own: no consequence, no wrapper, no catch-all."""
    return not rule.consequence and not rule.wraps and rule.log_class is not LogClass.FATAL


def decide(events: Iterable[Event]) -> LogVerdict:
    """The causal fatal; else READY; else the most severe, most specific warning; else NONE.

    The causal fatal is the most specific one, unless that one is a consequence (an NCCL abort after a watchdog
    timeout): then the most specific earlier fatal line with a class of its own explains the rest.
    """
    events = tuple(events)
    fatal = [e for e in events if e.severity is Severity.FATAL]
    if fatal:
        pick = _most_specific(fatal)
        follows = None
        if pick.consequence:
            causes = [e for e in fatal  # earlier, or in the same burst (its `what():` line)
                      if (e.line < pick.line or e.first_line == pick.first_line) and e is not pick
                      and not e.consequence and e.log_class is not LogClass.FATAL]
            if causes:
                pick, follows = _most_specific(causes), pick
        else:  # a peer gone, an abort after it: the first such line the cause explains
            follows = next((e for e in fatal if e.consequence and e.line > pick.line), None)
        return LogVerdict(str(pick.log_class), pick, events, follows)
    ready = next((e for e in events if e.log_class is LogClass.READY), None)
    if ready is not None:
        return LogVerdict(str(LogClass.READY), ready, events)
    if events:
        worst = max(e.severity.rank for e in events)
        pick = _most_specific([e for e in events if e.severity.rank == worst])
        return LogVerdict(str(pick.log_class), pick, events)
    return LogVerdict(NONE, None, events)


def _most_specific(events: list[Event]) -> Event:
    # max() keeps the first of equals: among equally specific causes the earliest is the root
    return max(events, key=lambda e: e.priority)


def classify_text(text: str, rules: RuleSet | None = None, sites: SiteClassifier | None = None) -> LogVerdict:
    """Classify a whole log (with `sites`: by the host's release's sites where no precise rule applies)."""
    classifier = LineClassifier(rules, sites)
    events: list[Event] = []
    lines = text.split("\n")  # not splitlines(): only newlines end a line, as in the journal stream
    if lines and lines[-1] == "":
        lines.pop()
    for raw in lines:
        events.extend(classifier.feed(raw))
    events.extend(classifier.flush())
    return decide(events)


_MAX_LOOKUPS = 20  # exception lines enough to tell releases apart; a log of thousands costs no more


def catch_all_lines(text: str, rules: RuleSet | None = None) -> list[str]:
    """The lines of `text` only a catch-all names (an exception with no rule of its own), normalised, in order, at
    most _MAX_LOOKUPS: what a release's sites can say more about, and where a release's sites differ."""
    rules = rules if rules is not None else default_rules()
    out: list[str] = []
    for raw in text.split("\n"):
        line = normalise(raw).text.strip()
        match = _match(line, rules) if line else None
        if (match is not None and match.rule.log_class is LogClass.FATAL and match.rule.priority <= CATCH_ALL_PRIORITY
                and line not in out):
            out.append(line)
            if len(out) >= _MAX_LOOKUPS:
                break
    return out
