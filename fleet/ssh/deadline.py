"""Deadlines for exchanges that paramiko lets wait forever: one thread closes what outlived its deadline.

paramiko waits without a timeout for an exec request's answer (`Channel.exec_command`) and, in its own
`recv_exit_status`, for a status a host may never send. Closing the channel ends every such wait at once, so
a channel armed here is closed at its deadline by one thread for the whole process (no thread per command);
`expired(token)` tells the caller that this, not the host, ended it.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Protocol


class Closable(Protocol):
    def close(self) -> None: ...


class Token:
    __slots__ = ("at", "expired", "target")

    def __init__(self, at: float, target: Closable):
        self.at, self.target, self.expired = at, target, False

    def disarm(self) -> None:
        """Nothing to close when its time comes."""
        self.target = _DONE

    def expire(self) -> Closable:
        """Its time came: what it closes now (nothing more after)."""
        target, self.target, self.expired = self.target, _DONE, True
        return target


class _Clock:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, Token]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, target: Closable) -> Token:
        token = Token(time.monotonic() + seconds, target)
        with self._cv:
            heapq.heappush(self._heap, (token.at, next(self._seq), token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fleet-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is token:
                self._cv.notify()
        return token

    def disarm(self, token: Token) -> None:
        with self._cv:
            token.disarm()  # dropped from the heap when its time comes; nothing to close then

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._heap and self._heap[0][2].target is _DONE:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._thread = None
                    return
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                token = heapq.heappop(self._heap)[2]
                target = token.expire()
            try:
                target.close()
            except Exception:  # noqa: BLE001 - a close that fails still ends the wait it was meant to end
                pass


class _Done:
    def close(self) -> None:
        return None


_DONE = _Done()
_clock = _Clock()


def arm(seconds: float, target: Closable) -> Token:
    """Close `target` after `seconds` unless disarmed first."""
    return _clock.arm(seconds, target)


def disarm(token: Token) -> None:
    _clock.disarm(token)
