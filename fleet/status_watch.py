"""`inv status --watch`: the status table refreshed in place until Ctrl-C.

Hosts are read on a bounded pool (parallel.MAX_WORKERS daemon threads, not one per host), each with status's
connect bounds; a host is due again `interval` seconds after its last read ended and is never read twice at
once, so a host that does not answer holds one worker and shows as unreachable on its own row while the
others keep refreshing.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Sequence

from rich.console import Console
from rich.live import Live

from fleet import parallel, status
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
          console: Console, stop: threading.Event | None = None) -> int:
    """Refresh until Ctrl-C (exit 130, like `inv logs -f`), the reader of --json going away, or `stop`."""
    board, stop, out = Board(hosts), stop or threading.Event(), threading.Lock()
    due = {h.name: 0.0 for h in hosts}  # monotonic time each host is next read; inf while it is being read
    work: queue.Queue[Host] = queue.Queue()

    def read(host: Host) -> None:
        try:
            row = status.collect_one(host, opts, port)
        finally:
            due[host.name] = time.monotonic() + interval
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

    def worker() -> None:
        while not stop.is_set():
            try:
                host = work.get(timeout=0.2)
            except queue.Empty:
                continue
            read(host)

    def schedule() -> None:  # a host in flight is due at inf: until its read ends only its worker writes `due`
        now = time.monotonic()
        for h in hosts:
            if due[h.name] <= now:
                due[h.name] = float("inf")
                work.put(h)

    for _ in range(max(1, min(parallel.MAX_WORKERS, len(hosts)))):
        threading.Thread(target=worker, daemon=True).start()
    try:
        if as_json:
            while not stop.is_set():
                schedule()
                stop.wait(0.1)
            return 0
        with Live(console=console, auto_refresh=False, transient=False) as live:
            drawn = False
            while not stop.is_set():
                schedule()
                if board.changed.wait(0.1) or not drawn:
                    board.changed.clear()
                    drawn = True
                    rows, waiting = board.snapshot()
                    table = status.table_of(rows, title=f"fleet status, every {interval:g}s (Ctrl-C ends)")
                    if waiting:
                        table.caption = "\n".join(filter(None, ["reading: " + ", ".join(waiting), table.caption]))
                        table.caption_justify = "left"
                    live.update(table, refresh=True)
            return 0
    except KeyboardInterrupt:
        return 130
    finally:
        stop.set()
