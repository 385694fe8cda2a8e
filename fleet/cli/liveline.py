"""Where a long step stands now (fleet.progress.Live): on a terminal, one transient line at the bottom, redrawn in
place and wiped before anything else is printed; elsewhere (a pipe, a log file, --json's stderr), a heartbeat:
one such line printed now and then, so that a log never goes quiet for longer than that while a phase runs."""

from __future__ import annotations

import shutil
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from fleet.progress import Live, Progress

if TYPE_CHECKING:
    from rich.console import Console, ConsoleRenderable

HEARTBEAT_S = 30.0  # off a terminal: the longest a running phase goes without a line
_DRAWN: weakref.WeakSet[LiveLine] = weakref.WeakSet()


class LiveLine:
    def __init__(self, out: IO[str], is_terminal: bool, width: int):
        self.out, self.on, self.width = out, is_terminal, max(20, width)
        self.shown = False
        self.lock = threading.Lock()
        _DRAWN.add(self)

    def show(self, text: str) -> None:
        """Draw `text` (one line, cut to the width) in place of the last one."""
        if not self.on:
            return
        line = " ".join(text.split())
        line = line if len(line) < self.width else line[:self.width - 2] + "…"
        with self.lock:
            self.out.write("\r\x1b[2K" + line)
            self.out.flush()
            self.shown = True

    def clear(self) -> None:
        """Wipe the line before something else is printed."""
        with self.lock:
            if self.shown:
                self.out.write("\r\x1b[2K")
                self.out.flush()
                self.shown = False

    def wiped_by(self, *consoles: Console) -> None:
        """Each of `consoles` wipes this line before it prints anything (a table, an error)."""
        from rich.console import RenderHook

        line = self

        class Wipe(RenderHook):
            def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
                line.clear()
                return renderables

        for out in consoles:
            out.push_render_hook(Wipe())


def clear_all() -> None:
    """Wipe every line drawn, before a line written past the consoles (a Ctrl-C notice on stderr)."""
    for line in list(_DRAWN):
        line.clear()


def say_now(line: str) -> None:
    """A line the operator needs at once (a Ctrl-C taken), on stderr, whatever the live output (wiped first)."""
    clear_all()
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


class Heartbeat:
    """Off a terminal: whether a Live line of `key` (a host) is due to be printed, `every` seconds after the last
    line printed for it (`said`)."""

    def __init__(self, every: float = HEARTBEAT_S, clock: Callable[[], float] = time.monotonic):
        self.every, self.clock = every, clock
        self.start = clock()
        self.last: dict[str, float] = {}

    def due(self, key: str) -> bool:
        now = self.clock()
        if now - self.last.get(key, self.start) < self.every:
            return False
        self.last[key] = now
        return True

    def said(self, key: str) -> None:
        self.last[key] = self.clock()


def progress_on_stderr(heartbeat: Heartbeat | None = None) -> Progress:
    """A Progress for a long step of a command: its Live lines redrawn in place on a terminal's stderr, elsewhere (a
    pipe, a log, --json's stderr) one printed when nothing was said for the heartbeat's while (30 s); its other lines
    said on stderr (stdout stays the command's answer, --json's document whole)."""
    from fleet.cli import say_on_stderr

    line = LiveLine(sys.stderr, sys.stderr.isatty(), shutil.get_terminal_size().columns)
    beat = heartbeat or Heartbeat()

    def say(message: str) -> None:
        if isinstance(message, Live):
            if line.on:
                line.show(message)
                return
            if not beat.due(""):
                return
        beat.said("")
        line.clear()
        say_on_stderr(message)
    return say
