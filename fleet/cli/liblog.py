"""Where the libraries' own log records go (paramiko's transport threads above all): never to Python's
last-resort handler, which printed their tracebacks on the operator's terminal (a host that accepts TCP and
sends no SSH banner gave three of them beside its one-line row), but into a bounded buffer that `-v` prints,
one line per record, tracebacks left out. What failed is already the host's row; these lines are the detail."""

from __future__ import annotations

import logging
import re
from collections import deque

KEPT = 500  # records held; the oldest go first
_TRACEBACK = re.compile(r"^(\s|Traceback \(|During handling of|The above exception|$)|^[\w.]+(Error|Exception)\b")


class _Held(logging.Handler):
    """Every record of WARNING and above, kept as (logger, message); never written anywhere by itself."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: deque[tuple[str, str]] = deque(maxlen=KEPT)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a library's malformed format string: its template is still worth a line
            text = str(record.msg)
        self.records.append((record.name, text))


HELD = _Held()


def install() -> None:
    """A handler on the root logger, so no library record reaches logging.lastResort (stderr), and Python's
    warnings held the same way (they were printed raw, `.../rules.py:56: FutureWarning: Possible nested set ...`
    and the source line); idempotent."""
    root = logging.getLogger()
    if HELD not in root.handlers:
        root.addHandler(HELD)
    logging.captureWarnings(True)  # to the `py.warnings` logger, so to HELD


def lines() -> list[str]:
    """The held records as `logger: message`, one line each, tracebacks dropped, repeats counted."""
    seen: dict[str, int] = {}
    for name, text in list(HELD.records):
        first = text.splitlines()[0] if text else ""
        if _TRACEBACK.match(first):
            continue
        line = f"{name}: {first.strip()}"
        seen[line] = seen.get(line, 0) + 1
    return [line + (f" (x{n})" if n > 1 else "") for line, n in seen.items()]
