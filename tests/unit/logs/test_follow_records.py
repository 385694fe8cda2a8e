"""fleet.logs.follow.read_lines: one LogLine per journal line, its classification a field of it (before, a classified
line came twice: the line, then its event as a line of its own, so `inv logs --json` counted it twice)."""

from __future__ import annotations

import threading

from fleet.logs.follow import LogLine, read_lines
from fleet.logs.rules import LogClass, Severity

AT = "2026-12-05T21:00:0{}+0000 sbx0 python3[342]: "
LINES = [
    "Load weight begin.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB.",
    "Traceback (most recent call last):",
    '  File "/x/sglang/srt/model_executor/model_runner.py", line 99, in load_model',
    "    raise torch.OutOfMemoryError(self.rank.oom_message(1.75))",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB.",
    "-- Boot 0123456789abcdef0123456789abcdef --",
    "[2026-12-05 21:00:09] Load weight begin.",
]
JOURNAL = [line if line.startswith("-- ") else AT.format(i) + line for i, line in enumerate(LINES)]


class Chunks:
    """A journal source giving its lines in the chunks given ("" once: nothing came within the read)."""

    def __init__(self, *chunks: list[str]) -> None:
        self.chunks = [("".join(f"{line}\n" for line in chunk)) for chunk in chunks]

    def read(self, timeout: float) -> str | None:
        return self.chunks.pop(0) if self.chunks else None

    def close(self) -> None:
        pass


def _read(source: Chunks) -> list[LogLine]:
    out: list[LogLine] = []
    read_lines(source, "sbx0", out.append, threading.Event())
    return out


def test_each_line_is_one_record_with_its_class_on_it():
    out = _read(Chunks(JOURNAL))
    assert [r.text for r in out] == LINES  # fails before: the two OOM lines came twice
    # journalctl's mark between two boots is a record of its own, with no time: the host started again there
    assert [(r.time, r.boot) for r in out if r.boot] == [(None, "0123456789abcdef0123456789abcdef")]
    classes = [(r.text[:22], r.event.log_class, r.event.severity) for r in out if r.event]
    assert classes == [("torch.OutOfMemoryError", LogClass.CUDA_OOM, Severity.FATAL)] * 2
    assert out[1].event is not None and out[5].event is not None  # on the lines that say it
    assert [r.time for r in out][:2] == ["2026-12-05T21:00:00+0000", "2026-12-05T21:00:01+0000"]


def test_a_traceback_waits_for_its_close_and_the_lines_before_it_do_not():
    """Fed a line at a time: a plain line is out at once; a fatal message (it may go on) and a traceback come out
    once the line after them closes them, the line that says the class carrying its event."""
    out: list[LogLine] = []
    seen: list[int] = []

    class Watched(Chunks):
        def read(self, timeout: float) -> str | None:
            seen.append(len(out))
            return super().read(timeout)

    read_lines(Watched(*[[line] for line in JOURNAL]), "sbx0", out.append, threading.Event())
    # before each read: the lines out; the OOM line waits for the next, the traceback (3-6) for the next record
    # (the boot's mark, read as an empty line to classify, is within a traceback; the header after it closes it)
    assert seen == [0, 1, 1, 2, 2, 2, 2, 2, 8]
    assert [r.event is not None for r in out] == [False, True, False, False, False, True, False, False]


def test_a_journal_cut_mid_traceback_still_shows_each_line_once():
    out: list[LogLine] = []
    stop = threading.Event()

    class Stopping(Chunks):
        def read(self, timeout: float) -> str | None:
            got = super().read(timeout)
            if not self.chunks:
                stop.set()
            return got if got is not None else ""

    read_lines(Stopping(JOURNAL[:4]), "sbx0", out.append, stop)
    assert [r.text for r in out] == LINES[:4]


def test_a_fatal_line_nothing_follows_is_shown_within_the_hold_while_following():
    """`inv logs -f` on a server that wrote its fatal line last and stalled: before, the line waited for a next
    line or Ctrl-C; now HOLD_S at most (a fake clock: each quiet read is a second)."""
    out: list[LogLine] = []
    stop, now = threading.Event(), [0.0]
    quiet_reads: list[int] = []

    class Stalled(Chunks):
        def read(self, timeout: float) -> str | None:
            if self.chunks:
                return super().read(timeout)
            now[0] += 1.0
            quiet_reads.append(len(out))
            if len(quiet_reads) == 5:
                stop.set()
            return ""

    read_lines(Stalled(JOURNAL[:2]), "sbx0", out.append, stop, clock=lambda: now[0])
    assert quiet_reads[0] == 1 and quiet_reads[-1] == 2, quiet_reads  # out before the stop, within HOLD_S
    assert [r.text for r in out] == LINES[:2]
