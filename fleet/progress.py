"""How a long step tells its caller what it is doing: a callback taking one line (the CLI draws it). A `Live`
line only says where the step stands now (phase, elapsed against its budget, the last line seen): a terminal
shows it in place of the one before; elsewhere the CLI prints one now and then (a heartbeat), the step's own
lines (one per phase) say the rest. `ticking` says Live lines for a step that is one blocking call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Progress = Callable[[str], None]
EVERY_S = 1.0  # how often a step in progress says where it stands


def quiet(message: str) -> None:
    """A Progress that says nothing."""


class Live(str):
    """A progress line that stands for the step's state now, replaced by the next (see the module's docstring)."""


def prefixed(prefix: str, message: str) -> str:
    """`prefix + message`, still Live where `message` was."""
    return Live(prefix + message) if isinstance(message, Live) else prefix + message


def standing(phase: str, elapsed: float, budget: float, last: str | None = None, note: str = "") -> Live:
    """The one wording of where a phase stands: 'phase jit: 12s of 900s budget; ninja 2/3; last line: ...'
    (`note`: what else is known of the phase, e.g. a count its lines carry)."""
    tail = "" if last is None else f"; last line: {last.strip()[:120] or '(none yet)'}"
    return Live(f"phase {phase}: {elapsed:.0f}s of {budget:.0f}s budget{note}{tail}")


@contextmanager
def ticking(say: Progress, phase: str, budget: float, every: float = EVERY_S,
            clock: Callable[[], float] = time.monotonic, note: Callable[[], str] | None = None) -> Iterator[None]:
    """While the body runs (one blocking call: the verify's requests, the bench, a venv build, a stop), a thread
    says where it stands as Live every `every` seconds (`note`: what else is known now, e.g. the hosts still
    running); none is said once the body has returned."""
    since, done = clock(), threading.Event()

    def tick() -> None:
        while not done.wait(every):
            say(standing(phase, clock() - since, budget, note=note() if note else ""))

    thread = threading.Thread(target=tick, name=f"progress {phase}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def hosts_note(names: list[str], ended: set[str]) -> str:
    """Where a run over several hosts stands, for `ticking`'s note: '; 1 of 2 hosts done, still running: h1'."""
    running = [n for n in names if n not in ended]
    shown = ", ".join(running[:8]) + (f" and {len(running) - 8} more" if len(running) > 8 else "")
    return f"; {len(ended)} of {len(names)} hosts done" + (f", still running: {shown}" if running else "")
