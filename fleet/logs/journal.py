"""The one journal follower: `journalctl -f` on its own SSH channel, fed to invoke StreamWatchers
(fleet.logs.watch.LogWatcher) as it arrives, with a tick between reads so that time-based checks (phase
budgets, the unit's state, a stop request) fire even when no line comes.

Used by deploy and multi-node (`watch`: until READY, a fatal class, the unit ending, a phase outliving its
budget, or a stop) and by `inv logs` (`follow` with a watcher that hands every line on).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from fabric import Connection

from fleet import faulthook, parallel
from fleet.errors import FleetError
from fleet.host import journal as hostjournal
from fleet.host import programs as hostside
from fleet.host.journal import MARK, unmarked
from fleet.host.journal import command as command  # inv logs' and the tests' name for it
from fleet.host.service import unit_state
from fleet.host.session import ConnectionLost
from fleet.inventory import Host
from fleet.logs import bysite, phases, redact
from fleet.logs.bysite import SiteClassifier
from fleet.logs.classify import Event
from fleet.logs.rules import Severity
from fleet.logs.warmphases import Expect, PhaseClock
from fleet.logs.watch import FatalLogLine, LogWatcher, ServerReady
from fleet.outcomes import Outcome, ServerVerdict
from fleet.playbook import Budgets
from fleet.progress import EVERY_S, Progress, standing
from fleet.ssh import keepalive

if TYPE_CHECKING:
    import paramiko

COLD = Expect.cold_start()  # no cache placed: the playbook's budgets, nothing expected
READ_S = 0.5  # the longest a tick waits for a line
LIVE_S = EVERY_S  # how often a start in progress says where it stands (fleet.progress.Live)
KEEP_CHARS = 1 << 20  # a follower that runs for days keeps at most this much of the stream
MAX_LINE = 64 << 10  # a longer line is cut here and the rest of it dropped: no host can grow the buffer further
OPEN_S = 30.0  # opening the follower's channel and the answer to its exec request
STATUS_S = 2.0  # journalctl's exit status after its output ended (its refusal said, fleet.logs.journal.Follower)
CUT = " [line cut by fleet at 64 KiB]"


def cursor(conn: Connection, host: Host) -> str:
    """The journal's current end, so a follow starts exactly after it: no line missed or read twice."""
    return hostjournal.cursor_of(conn, host)


class Source(Protocol):
    def read(self, timeout: float) -> str | None: ...

    def close(self) -> None: ...


class JournalEnded(FleetError):
    """journalctl's output ended without its exit status while the connection stayed up: the host's error for
    `inv logs`, the stream's end for a deploy's watch (as it always was)."""


def _link_down(transport: paramiko.Transport | None, wait: float = 1.0) -> bool:
    """Whether the connection went: paramiko closes a dying transport's channels a moment before it marks the
    transport inactive, so a channel closed by that is given `wait` seconds to show it."""
    deadline = time.monotonic() + wait
    while transport is not None and transport.is_active() and not keepalive.lost(transport):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


class Follower:
    """A journalctl command on its own channel: complete lines (redacted) as they arrive."""

    def __init__(self, conn: Connection, host: Host, journal_command: str):
        self.host = host.name
        self.chan = hostjournal.open_follower(conn, host, journal_command, OPEN_S)
        self._buf = b""
        self._cutting = False  # dropping the rest of a line that was cut
        self._greeted = False  # past the mark: what the login shell printed before journalctl left out
        self.said: list[str] = []  # journalctl's stderr where it ended well: `Journal file ... is truncated, ignoring
        # file.` (a power cut's), `Hint: You are currently not seeing messages from other users ...`: lines left out
        self._err = b""  # its stderr so far (MAX_LINE at most)
        self._told = 0  # its warnings said while it ran (news)
        self._opened = time.monotonic()

    def read(self, timeout: float) -> str | None:
        """Complete lines that arrive within timeout ("" if none), newline-terminated; None once ended."""
        # A timed recv, never select(): select() gives the channel an OS pipe that paramiko's transport
        # thread may still write to after close(), killing the whole connection with EBADF.
        self.chan.settimeout(timeout)
        try:
            data = self.chan.recv(65536)
        except TimeoutError:
            return ""
        if not data and not self._greeted and self._buf:  # no mark came (no shell ran it): what came is the journal
            self._refused_unmarked(self._buf)  # unless it failed: something else ran (nologin said its line)
            self._greeted = True
        elif not data:
            why = keepalive.lost(self.chan.get_transport())
            if why:
                raise ConnectionLost(f"{self.host}: connection lost while following the journal: {why}")
            self._ended()
            return None
        if not self._greeted:
            self._buf += data
            at = self._buf.find(MARK)
            if at < 0 and len(self._buf) <= MAX_LINE:
                return ""
            self._greeted, data, self._buf = True, self._buf[at + len(MARK):] if at >= 0 else self._buf, b""
        if self._cutting:
            end = data.find(b"\n")
            if end < 0:
                return ""
            data, self._cutting = data[end + 1:], False
        self._buf += data
        *complete, self._buf = self._buf.split(b"\n")
        lines = [redact.line(c[:MAX_LINE].decode("utf-8", "replace")) + (CUT if len(c) > MAX_LINE else "")
                 for c in complete]
        if len(self._buf) > MAX_LINE:
            lines.append(redact.line(self._buf[:MAX_LINE].decode("utf-8", "replace")) + CUT)
            self._buf, self._cutting = b"", True
        return "".join(line + "\n" for line in lines)

    def _ended(self) -> None:
        """The journal's end said as it came: journalctl's own refusal (its status not 0: a --since it cannot parse,
        a unit name it refuses) is the host's error with journalctl's first line; an end without a status is the
        link lost where the connection went with it (a host powered off, its sshd killed), else journalctl ended
        by a signal (paramiko keeps no exit-signal) on a link still up: JournalEnded. Never an empty journal."""
        if not self.chan.status_event.wait(STATUS_S) or self.chan.exit_status == -1:  # paramiko's -1: closed, none
            if _link_down(self.chan.get_transport()):
                raise ConnectionLost(f"{self.host}: connection lost while following the journal: the channel "
                                     "closed with the connection (the host or its sshd went)")
            raise JournalEnded(f"{self.host}: journalctl ended without its exit status within {STATUS_S:g}s while "
                               "the connection stayed up (killed by a signal?)")
        if self.chan.exit_status == 0:
            self.said = _said(_warnings(self._stderr())[self._told:])
            return
        self._refused_unmarked(b"")
        said = unmarked(self._stderr()[:4096]).decode("utf-8", "replace")
        why = next((line.strip() for line in said.splitlines() if line.strip()), "nothing on stderr")
        raise FleetError(f"{self.host}: journalctl refused (exit {self.chan.exit_status}): {redact.line(why)[:300]}")

    def _refused_unmarked(self, out: bytes) -> None:
        """No mark came and the command failed: the host ran something else in its place (a ForceCommand, an
        authorized_keys command=, nologin), not journalctl: it said `journalctl refused (exit 1): nothing on stderr`
        below nologin's line shown as a journal line."""
        if self._greeted or not self.chan.status_event.wait(STATUS_S) or self.chan.exit_status in (0, -1):
            return
        err = unmarked(self._stderr()[:4096])
        raise FleetError(f"{self.host}: " + redact.line(hostside.answered_otherwise(
            "the journal's command", self.chan.exit_status, out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"))))

    def _stderr(self) -> bytes:
        """journalctl's stderr so far, what is waiting read in (MAX_LINE at most: no host can grow it further)."""
        while self.chan.recv_stderr_ready() and len(self._err) < MAX_LINE:
            self._err += self.chan.recv_stderr(65536)
        return self._err

    def news(self) -> list[str]:
        """journalctl's warnings while it still runs, once it has run STATUS_S (a refusal ends it before, said as
        its error): `inv logs -f` of a login outside systemd-journal got its Hint never, and no line either."""
        if time.monotonic() - self._opened < STATUS_S or self.chan.exit_status_ready():
            return []
        err = self._stderr()
        lines = _warnings(err[:err.rfind(b"\n") + 1])  # complete lines only
        fresh = lines[self._told:SAID_LINES]
        self._told += len(fresh)
        return fresh

    def close(self) -> None:
        self.chan.close()


SAID_LINES = 5  # journalctl's warnings kept of a read that ended well; the others counted


def _warnings(err: bytes) -> list[str]:
    """What journalctl said on stderr though it did not refuse: each a line it did not show, once, in order."""
    return [redact.line(line)[:300] for line in dict.fromkeys(
        line.strip() for line in unmarked(err).decode("utf-8", "replace").splitlines() if line.strip())]


def _said(lines: list[str]) -> list[str]:
    """The first SAID_LINES, the others counted."""
    return lines[:SAID_LINES] + ([f"and {len(lines) - SAID_LINES} more lines on its stderr"]
                                 if lines[SAID_LINES:] else [])


def follow(source: Source, watcher: LogWatcher, tick: Callable[[], ServerVerdict | None],
           keep_chars: int = KEEP_CHARS) -> ServerVerdict | None:
    """Feed what `source` reads to `watcher` (StreamWatcher.submit: the stream so far, at most about `keep_chars`
    of it) and call `tick` after every read, lines or not. Returns tick's verdict, or None when the stream ended;
    the watcher's own FatalLogLine / ServerReady propagate, and so does the operator's Ctrl-C
    (fleet.parallel.checkpoint: between reads, never inside one; the caller's finally closes the source)."""
    stream = ""
    while True:
        parallel.checkpoint()
        text = source.read(READ_S)
        if text is None:
            return None
        if text:
            stream += text
            watcher.submit(stream)
            if len(stream) > keep_chars:
                watcher.forget(len(stream))  # submit read every complete line: nothing pending is lost
                stream = ""
        verdict = tick()
        if verdict is not None:
            return verdict


class Startup:
    """What a starting server's lines say: its phase (each with a budget), the first warning of each class,
    and the last line for the evidence."""

    def __init__(self, budgets: Budgets, say: Progress, clock: Callable[[], float] = time.monotonic,
                 sites: SiteClassifier | None = None, expect: Expect = COLD, seen: PhaseClock | None = None):
        self.budgets, self.say, self.clock, self.expect = budgets, say, clock, expect
        self.seen = seen if seen is not None else PhaseClock()  # the phases gone through, with their seconds
        self.phase, self.since, self.last_line = "start", clock(), ""
        self.count: phases.Count | None = None  # the last count the phase's lines carried
        self._warned: set[str] = set()
        self._live_at = self.since
        self.watcher = LogWatcher(on_event=self._event, on_line=self._line, stop_on_ready=True, sites=sites)
        if (opening := expect.opening()) is not None:
            say(opening)

    def _line(self, line: str) -> str:
        self.last_line = line
        new = phases.advance(self.phase, line)
        if new != self.phase:
            spent = self.clock() - self.since
            self.say(f"phase {new} (after {spent:.1f}s in {self.phase}; budget {getattr(self.budgets, new):.0f}s)")
            self.seen.left(self.phase, spent)
            for note in (self.expect.leaving(self.phase, spent), self.expect.entering(new)):
                if note is not None:
                    self.say(note)
            faulthook.reached(f"phase:{new}")
            self.phase, self.since, self.count = new, self.clock(), None
        self.count = phases.count_in(line) or self.count
        return line

    def ready(self) -> None:
        """The server is ready: what a warm start skipped is said."""
        for note in self.expect.skipped(self.seen.times()):
            self.say(note)

    def _event(self, event: Event) -> None:
        if event.severity is Severity.WARNING and event.log_class.value not in self._warned:
            self._warned.add(event.log_class.value)  # the first of each class; the rest are in the journal
            self.say(f"warning {event.log_class.value}: {event.text.splitlines()[0][:160]}")

    def live(self, every: float = LIVE_S) -> None:
        """Where the start stands, said as Live at most every `every` seconds: the phase, its time so far against
        its budget (HANG beyond it), the last line seen."""
        now = self.clock()
        if now - self._live_at < every:
            return
        self._live_at = now
        note = self.expect.standing_note(self.phase) + (f"; {self.count}" if self.count is not None else "")
        self.say(standing(self.phase, now - self.since, getattr(self.budgets, self.phase), self.last_line, note))

    def overdue(self) -> ServerVerdict | None:
        budget = getattr(self.budgets, self.phase)
        if self.clock() - self.since > budget:
            return Outcome.HANG, (f"no progress for {budget:.0f}s in phase {self.phase}; "
                                  f"last line: {self.last_line[:200]}")
        return None


def fatal(event: Event) -> ServerVerdict:
    return event.log_class.value, event.text.splitlines()[-1][:300]


def watch_startup(source: Source, startup: Startup, state: Callable[[], dict[str, str]],
                  stop: threading.Event | None = None, state_every: float = 2.0) -> ServerVerdict:
    """Until READY, a fatal class, the unit ending (`state()` says so), a phase outliving its budget, or
    `stop` being set (another node of a multi-node server failed)."""
    last_check = startup.clock()

    def tick() -> ServerVerdict | None:
        nonlocal last_check
        if stop is not None and stop.is_set():
            return Outcome.STOPPED, "another node of the deployment failed"
        if (late := startup.overdue()) is not None:
            return late
        startup.live()
        if startup.clock() - last_check > state_every:
            last_check = startup.clock()
            now = state()
            if now.get("ActiveState") in ("failed", "inactive"):
                for event in startup.watcher.finish():  # a traceback the exit cut short still names its cause
                    if event.severity is Severity.FATAL:
                        return fatal(event)
                return Outcome.EXITED, (f"the server exited ({now.get('Result', '?')}, status "
                                        f"{now.get('ExecMainStatus', '?')}); last line: {startup.last_line[:200]}")
        return None

    try:
        verdict = follow(source, startup.watcher, tick)
    except FatalLogLine as exc:
        return fatal(exc.event)
    except ServerReady as exc:
        startup.ready()
        return Outcome.READY, exc.event.text[:300]
    except JournalEnded as exc:
        return Outcome.EXITED, f"the journal stream ended: {exc}"
    finally:
        source.close()
    return verdict if verdict is not None else (Outcome.EXITED, "the journal stream ended")


def watch(conn: Connection, host: Host, unit: str, cursor: str, budgets: Budgets, say: Progress,
          stop: threading.Event | None = None, sglang: str | None = None,
          flashinfer: str | None = None, expect: Expect = COLD, seen: PhaseClock | None = None) -> ServerVerdict:
    """Follow the unit's journal after `cursor` through its startup (see watch_startup); with the `sglang` (and
    `flashinfer`) version the host runs, lines no rule names are classified by those releases' cached site
    indexes. `expect`: what a warm start expects of its phases (fleet.logs.warmphases); `seen` gets the phases
    gone through with their seconds."""
    source = Follower(conn, host, command(unit, cursor))
    startup = Startup(budgets, say, sites=bysite.for_release(sglang, flashinfer), expect=expect, seen=seen)
    return watch_startup(source, startup, lambda: unit_state(conn, host, unit), stop)
