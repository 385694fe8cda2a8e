"""`inv status --watch`: the status table refreshed in place until Ctrl-C.

Hosts are read on a bounded pool (parallel.MAX_WORKERS daemon threads, not one per host), each with status's
connect bounds; a host is due again `interval` seconds after its last read ended and is never read twice at
once, so a host that does not answer holds one worker and shows as unreachable on its own row while the
others keep refreshing.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence

from fleet import parallel
from fleet.errors import InputError
from fleet.inventory import Host
from fleet.multihost import status
from fleet.ssh.connect import ConnectOptions


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


class Poller:
    """Reads every host again `interval` seconds after its last read ended, on a bounded pool of daemon
    workers; each row goes to the board (and to `on_row`, which returns False to stop the watch)."""

    def __init__(self, hosts: Sequence[Host], opts: ConnectOptions, port: int, interval: float,
                 on_row: Callable[[status.HostStatus], bool] | None = None, stop: threading.Event | None = None,
                 collect: Callable[[Host, ConnectOptions, int], status.HostStatus] = status.collect_one):
        """`collect`: how one host is read (status.collect_one)."""
        self.hosts, self.opts, self.port, self.interval, self.on_row = hosts, opts, port, interval, on_row
        self.collect = collect
        self.board, self.stop = Board(hosts), stop or threading.Event()
        self._due = {h.name: 0.0 for h in hosts}  # monotonic time each host is next read; inf while read
        self._work: queue.Queue[Host] = queue.Queue()

    def start(self) -> None:
        for _ in range(max(1, min(parallel.MAX_WORKERS, len(self.hosts)))):
            threading.Thread(target=self._worker, daemon=True).start()

    def _read(self, host: Host) -> None:
        try:
            row = self.collect(host, self.opts, self.port)
        finally:
            self._due[host.name] = time.monotonic() + self.interval
        if self.stop.is_set():
            return
        self.board.put(row)
        if self.on_row is not None and not self.on_row(row):
            self.stop.set()

    def _worker(self) -> None:
        while not self.stop.is_set():
            try:
                host = self._work.get(timeout=0.2)
            except queue.Empty:
                continue
            self._read(host)

    def schedule(self) -> None:
        """Queue the hosts that are due; a host in flight is due at inf: until its read ends only its worker
        writes its time."""
        now = time.monotonic()
        for h in self.hosts:
            if self._due[h.name] <= now:
                self._due[h.name] = float("inf")
                self._work.put(h)
