"""One transient line at the bottom of a terminal: where a long step stands now (fleet.progress.Live), redrawn in
place and wiped before the next ordinary line; nothing at all where the output is not a terminal."""

from __future__ import annotations

import shutil
import sys
import threading
from typing import IO

from fleet.progress import Live, Progress


class LiveLine:
    def __init__(self, out: IO[str], is_terminal: bool, width: int):
        self.out, self.on, self.width = out, is_terminal, max(20, width)
        self.shown = False
        self.lock = threading.Lock()

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


def progress_on_stderr() -> Progress:
    """A Progress for a long step of a command: its Live lines redrawn in place on a terminal's stderr, its other
    lines said on stderr (stdout stays the command's answer, --json's document whole)."""
    from fleet.cli import say_on_stderr

    line = LiveLine(sys.stderr, sys.stderr.isatty(), shutil.get_terminal_size().columns)

    def say(message: str) -> None:
        if isinstance(message, Live):
            line.show(message)
            return
        line.clear()
        say_on_stderr(message)
    return say
