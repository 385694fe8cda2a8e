"""`inv status --watch`: the status table refreshed in place until Ctrl-C.

Each host is read on its own thread with status's connect bounds, so a host that does not answer shows as
unreachable on its own row while the others keep refreshing.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence

from rich.console import Console
from rich.live import Live

from fleet import status
from fleet.connect import ConnectOptions
from fleet.errors import InputError
from fleet.inventory import Host


class Board:
    """The latest row of every host, in inventory order; written by the host threads."""

    def __init__(self, hosts: Sequence[Host]):
        self.order = [h.name for h in hosts]
        self.rows: dict[str, status.HostStatus] = {}
        self.changed = threading.Event()
        self._lock = threading.Lock()

    def put(self, row: status.HostStatus) -> None:
        with self._lock:
            self.rows[row.host] = row
        self.changed.set()

    def snapshot(self) -> tuple[list[status.HostStatus], list[str]]:
        with self._lock:
            return [self.rows[n] for n in self.order if n in self.rows], [n for n in self.order if n not in self.rows]


def check_interval(interval: float | str) -> float:
    try:
        value = float(interval)
    except ValueError:
        raise InputError(f"--interval {interval}: give seconds, e.g. 5") from None
    if not 0.5 <= value <= 3600:
        raise InputError(f"--interval {interval}: give seconds between 0.5 and 3600")
    return value


def watch(hosts: Sequence[Host], opts: ConnectOptions, port: int, interval: float, as_json: bool,
          console: Console) -> int:
    """Refresh until Ctrl-C (exit 130, like `inv logs -f`)."""
    board, stop, out = Board(hosts), threading.Event(), threading.Lock()

    def poll(host: Host) -> None:
        while not stop.is_set():
            row = status.collect_one(host, opts, port)
            if stop.is_set():
                return
            board.put(row)
            if as_json:
                with out:
                    try:
                        sys.stdout.write(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                     **row.to_json()}, default=str) + "\n")
                        sys.stdout.flush()
                    except BrokenPipeError:  # the reader went away (| head): stop quietly
                        stop.set()
            stop.wait(interval)

    threads = [threading.Thread(target=poll, args=(h,), daemon=True) for h in hosts]
    for t in threads:
        t.start()
    try:
        if as_json:
            while not stop.wait(0.2):
                pass
            return 0  # the reader went away
        with Live(console=console, auto_refresh=False, transient=False) as live:
            while True:
                board.changed.wait(0.5)
                board.changed.clear()
                rows, waiting = board.snapshot()
                table = status.table_of(rows, title=f"fleet status, every {interval:g}s (Ctrl-C ends)")
                if waiting:
                    table.caption = "\n".join(filter(None, ["reading: " + ", ".join(waiting), table.caption]))
                    table.caption_justify = "left"
                live.update(table, refresh=True)
    except KeyboardInterrupt:
        stop.set()
        return 130
