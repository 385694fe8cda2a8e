"""The live per-host board of a rolling deploy (its state is kept with or without a terminal; rich draws it
only where one looks: `--json` runs never import rich)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

COLOURS = {"ok": "green", "unchanged": "green", "rolled_back": "yellow", "failed": "bold red", "dry-run": "cyan",
           "skipped": "dim", "waiting": "dim", "deploying": "bold cyan"}


@dataclass
class _Row:
    host: str
    batch: int
    state: str = "waiting"  # waiting | deploying | then the deploy's status, or skipped
    note: str = ""
    started: float | None = None
    ended: float | None = None

    def update(self, state: str | None, note: str | None) -> None:
        if state is not None:
            if state == "deploying" and self.started is None:
                self.started = time.monotonic()
            elif state not in ("waiting", "deploying") and self.started is not None and self.ended is None:
                self.ended = time.monotonic()
            self.state = state
        if note is not None:
            self.note = note

    def elapsed(self) -> str:
        if self.started is None:
            return "-"
        return f"{(self.ended or time.monotonic()) - self.started:.0f}s"


class Board:
    """The live per-host board of a rolling deploy: host, batch, state, the latest progress line, elapsed.
    Updated from the deploy threads; rendered by rich's Live from the main thread."""

    def __init__(self, hosts: list[tuple[str, int]], batches: int):
        self.rows = {name: _Row(name, batch) for name, batch in hosts}
        self.batches = batches
        self.headline = ""
        self._lock = threading.Lock()

    def update(self, host: str, state: str | None = None, note: str | None = None) -> None:
        with self._lock:
            self.rows[host].update(state, note)

    def says(self, headline: str) -> None:
        self.headline = headline

    def table(self) -> Table:
        from rich.table import Table

        from fleet.cli.hosttext import escape

        with self._lock:
            table = Table(title=self.headline or None, title_justify="left")
            for col in ("host", "batch", "state", "rung / phase / latest", "elapsed"):
                table.add_column(col, overflow="ellipsis", no_wrap=col != "rung / phase / latest",
                                 justify="right" if col == "elapsed" else "left")
            for row in self.rows.values():
                colour = COLOURS.get(row.state, "white")
                table.add_row(row.host, f"{row.batch}/{self.batches}", f"[{colour}]{row.state}[/]",
                              escape(row.note[:160]), row.elapsed())
            return table
