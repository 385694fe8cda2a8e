"""Lines every tensor-parallel rank prints alike (`[... TP3] text` from each of 8 ranks), folded into one with
a count for `inv logs`: held a moment while their ranks' copies arrive, then shown once, in order."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleet.logs.normalise import normalise

# sglang's header names the rank: "[2026-02-23 10:00:00 TP3] ", "[2026-02-23 10:00:00 DP0 TP3] "
_TAG = re.compile(r"^\[[^\]]*?((?:\b(?:TP|DP|EP|PP|CP)\d+ ?)+)\]")
HOLD_S = 0.5  # how long a rank's line waits for the others' copies (they come within milliseconds)


def rank_of(text: str) -> str | None:
    """'TP3' (or 'DP0 TP3') of a line a rank printed; None for any other line."""
    m = _TAG.match(text)
    return m.group(1).strip() if m else None


@dataclass
class Folded:
    """A line as shown: `line` the first copy, `ranks` every rank that printed it (empty: not a rank's line)."""

    line: Any  # fleet.logs.follow.LogLine
    ranks: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return max(1, len(self.ranks))


class RankFolder:
    """One host's lines in, Folded out through `emit`: a rank's line is held (at most `hold_s`) until a line that
    is not a rank's, or the same rank again, or time ends it; copies from other ranks (same text once the header
    is gone, same class) add to its count. Not thread-safe: the caller holds its lock."""

    def __init__(self, emit: Callable[[Folded], None], hold_s: float = HOLD_S,
                 clock: Callable[[], float] = time.monotonic):
        self.emit, self.hold_s, self.clock = emit, hold_s, clock
        self.pending: dict[tuple[str | None, str], tuple[float, Folded]] = {}

    def add(self, line: Any) -> None:
        rank = rank_of(line.text)
        if rank is None:
            self.flush()
            self.emit(Folded(line))
            return
        key = (str(line.event.log_class) if line.event else None, normalise(line.text).text)
        held = self.pending.get(key)
        if held is not None and rank not in held[1].ranks:
            held[1].ranks.append(rank)
        else:
            if held is not None:  # the same rank says it again: a new line, after what is held
                self.flush()
            self.pending[key] = (self.clock(), Folded(line, [rank]))
        self.expire()

    def expire(self) -> None:
        """Show what has waited `hold_s`, and what came before it (the order is kept)."""
        now = self.clock()
        keys = list(self.pending)
        last = max((i for i, k in enumerate(keys) if now - self.pending[k][0] >= self.hold_s), default=-1)
        for k in keys[:last + 1]:
            self.emit(self.pending.pop(k)[1])

    def flush(self) -> None:
        for k in list(self.pending):
            self.emit(self.pending.pop(k)[1])
