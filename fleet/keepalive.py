"""A ServerAlive-style watchdog for one SSH transport (OpenSSH's ServerAliveInterval / ServerAliveCountMax).

paramiko's own keepalive sends requests that want no reply, so it never learns that a link is dead: a
command on a cut link waits for TCP to give up, which takes many minutes. Here a request that wants a reply
goes out every `interval` seconds; when one stays unanswered for `interval * count_max` seconds the
transport is closed, so every channel on it ends at once and `lost(transport)` says why.
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
        threading.Thread(target=self._watch, name="fleet-keepalive-watch", daemon=True).start()

    def _ping(self) -> None:
        # global_request(wait=True) returns on the answer or once the transport is closed, never by timeout:
        # the watch thread below is what gives up on it.
        # like ServerAliveInterval, the first request goes out after `interval`: a short command costs nothing
        while not self._stop.wait(self.interval) and self.transport.is_active():
            self.sent = time.monotonic()
            try:
                self.transport.global_request(_KIND, wait=True)
            except (OSError, EOFError, paramiko.SSHException):
                return  # the transport is going down: whoever uses it sees that on their own
            self.answered = time.monotonic()

    def _watch(self) -> None:
        limit = self.interval * self.count_max
        while self.transport.is_active() and not self._stop.wait(min(self.interval, 1.0)):
            silent = time.monotonic() - self.sent
            if self.sent > self.answered and silent > limit:
                why = f"the link went silent: {self.count_max} keepalives over {silent:.0f}s got no answer"
                setattr(self.transport, "fleet_lost", why)  # noqa: B010 - paramiko's Transport has no slot for it
                self.transport.close()
                return


def start(transport: paramiko.Transport, interval: float, count_max: int) -> Watchdog:
    return Watchdog(transport, interval, count_max)


def lost(transport: paramiko.Transport | None) -> str | None:
    """Why the watchdog closed this transport, or None."""
    return getattr(transport, "fleet_lost", None)
