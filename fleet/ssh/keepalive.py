"""A ServerAlive-style watchdog for SSH transports (OpenSSH's ServerAliveInterval / ServerAliveCountMax).

paramiko's own keepalive sends requests that want no reply, so it never learns that a link is dead: a
command on a cut link waits for TCP to give up, which takes many minutes. Here a request that wants a reply
goes out every `interval` seconds; when one stays unanswered for `interval * count_max` seconds the
transport is closed, so every channel on it ends at once and `lost(transport)` says why.

Each transport has one thread that pings (paramiko's request blocks until its answer or the transport's
end); one thread in the process watches every transport's silence, so a fleet costs one thread per link,
not two.
"""

from __future__ import annotations

import threading
import time

import paramiko

_KIND = "keepalive@openssh.com"  # unknown to the server: it answers REQUEST_FAILURE, which is an answer


class Watchdog:
    def __init__(self, transport: paramiko.Transport, interval: float, count_max: int):
        self.transport, self.interval, self.count_max = transport, interval, count_max
        self.sent = self.answered = time.monotonic()
        self._stop = threading.Event()
        threading.Thread(target=self._ping, name="fleet-keepalive-ping", daemon=True).start()
        _watcher.add(self)

    def _ping(self) -> None:
        # global_request(wait=True) returns on the answer or once the transport is closed, never by timeout:
        # the watcher below is what gives up on it.
        # like ServerAliveInterval, the first request goes out after `interval`: a short command costs nothing
        while not self._stop.wait(self.interval) and self.transport.is_active():
            self.sent = time.monotonic()
            try:
                self.transport.global_request(_KIND, wait=True)
            except (OSError, EOFError, paramiko.SSHException):
                return  # the transport is going down: whoever uses it sees that on their own
            self.answered = time.monotonic()

    def check(self, now: float) -> bool:
        """Close the transport if its last request has gone unanswered too long; False once it is done with."""
        if not self.transport.is_active():
            self._stop.set()
            return False
        silent = now - self.sent
        if self.sent > self.answered and silent > self.interval * self.count_max:
            why = f"the link went silent: {self.count_max} keepalives over {silent:.0f}s got no answer"
            setattr(self.transport, "fleet_lost", why)  # noqa: B010 - paramiko's Transport has no slot for it
            self.transport.close()
            self._stop.set()
            return False
        return True


class _Watcher:
    """One thread for every watchdog in the process: wakes each `TICK` seconds while any transport is up."""

    TICK = 0.5

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dogs: list[Watchdog] = []
        self._thread: threading.Thread | None = None

    def add(self, dog: Watchdog) -> None:
        with self._lock:
            self._dogs.append(dog)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fleet-keepalive-watch", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:
                dogs = list(self._dogs)
            done = {id(d) for d in dogs if not d.check(now)}
            with self._lock:
                self._dogs = [d for d in self._dogs if id(d) not in done]
                if not self._dogs:
                    self._thread = None
                    return


_watcher = _Watcher()


def start(transport: paramiko.Transport, interval: float, count_max: int) -> Watchdog:
    return Watchdog(transport, interval, count_max)


def lost(transport: paramiko.Transport | None) -> str | None:
    """Why the watchdog closed this transport, or None."""
    return getattr(transport, "fleet_lost", None)
