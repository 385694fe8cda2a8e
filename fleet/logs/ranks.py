"""Lines every tensor-parallel rank prints alike (`[... TP3] text` from each of 8 ranks), folded into one with
a count for `inv logs`: held a moment while their ranks' copies arrive, then shown once, in order."""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleet.logs.normalise import normalise

# sglang's header names the rank: "[2026-02-23 10:00:00 TP3] ", "[2026-02-23 10:00:00 DP0 TP3] "
_TAG = re.compile(r"^\[[^\]]*?((?:\b(?:TP|DP|EP|PP|CP)\d+ ?)+)\]")
_PID = re.compile(r"\[(\d+)\]$")  # the journal's SYSLOG_IDENTIFIER[PID]
HOLD_S = 0.5  # how long a rank's line waits for its next copy (most come within milliseconds)
NEAR_S = 2.0  # copies further apart on the host's clock are other lines; the longest a line waits for its copies
# an address is each process's own (`<MoERunner object at 0x7c70ccce8350>`, a native frame under ASLR): the ranks'
# copies of one line differ there and nowhere else
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
# a rank spelled in the text itself, as the upstream sources print it (fleet/upstream's wheel corpus): flashinfer's
# `Rank 3 workspace[0] 0x...` and `rank 3 allocated ipc_handles: [[...]]` (prints: no header, a process each),
# sglang's `[TP3] Bound to ...`, `[Rank 3] ...`, `FlashInfer workspace initialized for rank 3, world_size 8`,
# `... request rank=3 ...`, `tp_rank=3`: the ranks' copies differ there (and in an address) and nowhere else
# (`TP 8` unbracketed is as often a size: only sglang's bracketed prefix is a rank)
_SPELLED = re.compile(r"\[TP ?(?P<tp>\d+)\]|\b[Rr]ank (?P<n>\d+)\b|\b(?:(?P<kind>tp|dp|ep|pp|cp)_)?rank=(?P<k>\d+)\b")
_ISO = "%Y-%m-%dT%H:%M:%S%z"  # journalctl's short-iso
Said = tuple[str | None, str]  # a line's class and its text without the header


def rank_of(text: str) -> str | None:
    """'TP3' (or 'DP0 TP3') of a line a rank printed; None for any other line."""
    m = _TAG.match(text)
    return m.group(1).strip() if m else None


def spelled_rank(text: str) -> tuple[str, str] | None:
    """('TP3', the text with that rank as `{rank}`) for a line that says its rank in its words, once; None else.
    A line whose header names a rank keeps a rank its words name only where it is that same rank (TP0 saying
    `rank=5 failed` is about another rank: not a copy of TP1's `rank=6 failed`)."""
    head = _TAG.match(text)
    start = head.end() if head else 0  # the header's own rank is rank_of's
    found = list(_SPELLED.finditer(text, start))
    if len(found) != 1:
        return None
    m = found[0]
    rank = f"{(m['kind'] or 'tp').upper()}{m['tp'] or m['n'] or m['k']}"
    if head is not None and rank not in head.group(1).split():
        return None
    return rank, text[:m.start()] + "{rank}" + text[m.end():]


def printer_of(line: Any) -> str | None:
    """Who printed a line, to tell its copies apart: the rank its header names ('TP3'), else the rank its words
    name (`Rank 3 workspace[0] ...`), else the process the journal names ('pid 342'): a traceback's lines carry no
    header (only the log record's first line has it), and each rank is a process of its own, so the error line of
    a crash on TP 8 comes 8 times from 8 processes."""
    rank = rank_of(line.text)
    if rank is not None:
        return rank
    spelled = spelled_rank(line.text)
    if spelled is not None:
        return spelled[0]
    m = _PID.search(getattr(line, "process", None) or "")
    return f"pid {m.group(1)}" if m else None


@dataclass
class Folded:
    """A line as shown: `line` the first copy, `ranks` every rank that printed it (empty: not a rank's line)."""

    line: Any  # fleet.logs.follow.LogLine
    ranks: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return max(1, len(self.ranks))


def _near(held: Any, line: Any) -> bool:
    """Copies of one line come within moments, on the host's clock: the same text from the next attempt's ranks
    (their processes new, read in the same breath by `inv logs` without -f) is another line."""
    try:
        apart = datetime.strptime(line.time, _ISO) - datetime.strptime(held.time, _ISO)
    except (TypeError, ValueError):  # no time, or not journalctl's short-iso: the hold alone decides
        return True
    return abs(apart.total_seconds()) <= NEAR_S


class RankFolder:
    """One host's lines in, Folded out through `emit`: a rank's line is held until a line that is not a rank's, or
    time ends it: `hold_s` after its last copy came (a rank's autotuner warnings come a few hundred ms apart), at
    most NEAR_S after its first (copies further apart are other lines); copies from other ranks (same text once
    the header is gone, same class) add to the first held line that rank has not said yet, and the same rank saying
    it again is a new line, after those held (a traceback repeats a frame line; its ranks' copies still fold). Not
    thread-safe: the caller holds its lock."""

    def __init__(self, emit: Callable[[Folded], None], hold_s: float = HOLD_S,
                 clock: Callable[[], float] = time.monotonic):
        self.emit, self.hold_s, self.clock = emit, hold_s, clock
        # in the order they came: when its first and its last copy came, what it says, the line
        self.pending: OrderedDict[int, tuple[float, list[float], Said, Folded]] = OrderedDict()
        self.copies: dict[Said, list[int]] = {}  # the held lines of each text, first first
        self.seen = 0

    def add(self, line: Any) -> None:
        rank = printer_of(line)
        if rank is None:
            self.flush()
            self.emit(Folded(line))
            return
        text = normalise(line.text).text
        spelled = spelled_rank(line.text)
        if spelled is not None:  # the rank said in words is the printer's: its copies differ there alone
            text = normalise(spelled[1]).text
        said = (str(line.event.log_class) if line.event else None, _ADDRESS.sub("0x?", text))
        held = self.copies.setdefault(said, [])
        first = next((n for n in held if rank not in self.pending[n][3].ranks and _near(self.pending[n][3].line, line)),
                     None)
        if first is not None:
            _, last, _, folded = self.pending[first]
            folded.ranks.append(rank)
            last[0] = self.clock()
        else:
            self.seen += 1
            now = self.clock()
            self.pending[self.seen] = (now, [now], said, Folded(line, [rank]))
            held.append(self.seen)
        self.expire()

    def expire(self) -> None:
        """Show what has waited `hold_s` for its next copy or NEAR_S since its first, and what came before it (the
        order is kept)."""
        now = self.clock()
        while self.pending:
            first, last, _, _ = self.pending[next(iter(self.pending))]
            if now - last[0] < self.hold_s and now - first < max(NEAR_S, self.hold_s):
                break
            self._show_first()

    def flush(self) -> None:
        while self.pending:
            self._show_first()

    def _show_first(self) -> None:
        _, (_, _, said, folded) = self.pending.popitem(last=False)
        held = self.copies[said]
        held.pop(0)
        if not held:
            del self.copies[said]
        self.emit(folded)
