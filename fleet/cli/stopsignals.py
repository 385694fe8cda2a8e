"""The signals that stop fleet's program, and what it says of them: each ends the run as a Ctrl-C does (no host
starts, those under way end their step, a line per host, exit 130)."""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import NoReturn

from fleet.errors import EXIT_INTERRUPTED


def interrupted() -> NoReturn:
    """A Ctrl-C before any task could answer it: one word, exit 130, as a task's own Ctrl-C ends."""
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_INTERRUPTED)


def terminated(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (timeout(1), a CI job cancelled, `kill`) answered as a Ctrl-C: said, then the task's own Ctrl-C (no
    host starts, those under way end their step, a line per host, exit 130; a second one stops waiting). It killed
    the run silently, exit 143, a deploy's host left mid-step and its lock held, nothing said."""
    try:
        os.write(2, f"fleet: {signal.Signals(signum).name}: taken as Ctrl-C\n".encode())
    except OSError:  # a terminal hung up
        pass
    raise KeyboardInterrupt


STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def ignore() -> None:
    """The three ignored from now on: the run has chosen its exit code. One that came just before has its
    handler run between two of these calls, its KeyboardInterrupt dropped here (it replaced the exit chosen: a
    SIGHUP just after the prompt's failed read died of SIGINT, status -2, a traceback)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)  # none trips a handler from here; ignored, dropped
    for sig in STOPS:
        for _ in range(len(STOPS) + 1):  # each handler tripped before the block runs once
            try:
                signal.signal(sig, signal.SIG_IGN)
                break
            except KeyboardInterrupt:
                continue
    signal.pthread_sigmask(signal.SIG_SETMASK, before)


def answer() -> None:
    """From now on SIGINT is Ctrl-C, and SIGTERM and SIGHUP are taken as one (nohup's ignored SIGHUP stays so)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, terminated)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        terminals = tuple(fd for fd in (1, 2) if os.isatty(fd))  # once hung up, a terminal no longer says it is one
        signal.signal(signal.SIGHUP, lambda signum, frame: hung_up(terminals, signum, frame))


def hung_up(terminals: tuple[int, ...], signum: int, frame: FrameType | None) -> None:
    """SIGHUP: the terminal fleet ran in is gone (the ssh session to the bastion dropped, the window closed). It
    killed the run silently, a deploy's host left mid-step; now it is a Ctrl-C, as SIGTERM is, and what would have
    gone to that terminal (`terminals`) goes nowhere (a write there fails, and exit 120 at the end): output sent to a
    file or a pipe is whole."""
    with open(os.devnull, "wb") as nowhere:
        for fd in terminals:
            os.dup2(nowhere.fileno(), fd)
    terminated(signum, frame)
