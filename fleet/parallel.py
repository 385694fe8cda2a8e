"""Run one function per host on a bounded pool; every host gets an outcome, none hides another's.

The pool's threads are daemons: a host stuck past every deadline (or abandoned by --host-timeout) costs its
thread, never the run's end. concurrent.futures' own pool joins its threads when the interpreter exits, so
one stuck host would keep `inv` from ever exiting."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fleet.errors import FleetError
from fleet.inventory import Host

T = TypeVar("T")
MAX_WORKERS = 32


@dataclass
class Outcome(Generic[T]):
    host: Host
    ok: bool
    value: T | None
    error: str | None
    seconds: float


class Pool:
    """At most `workers` daemon threads, started as work comes; submit() returns a Future. abandon() gives
    up on one busy thread: one more may start, so queued work never waits on a host given up on."""

    def __init__(self, workers: int = MAX_WORKERS, name: str = "fleet-host"):
        self._limit, self._name = max(1, workers), name
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = self._queued = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            self._queued += 1
            self._work.put((future, lambda: fn(*args)))
            self._grow()
        return future

    def abandon(self) -> None:
        with self._lock:
            self._limit += 1
            self._grow()

    def _grow(self) -> None:  # under the lock
        if self._queued > self._idle and len(self._threads) < self._limit:
            t = threading.Thread(target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            self._idle += 1  # counted idle from its start: it is about to take work
            t.start()

    def _run(self) -> None:
        while True:
            item = self._work.get()
            with self._lock:
                self._idle -= 1
                if item is not None:
                    self._queued -= 1
            if item is None:
                return
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1

    def shutdown(self) -> None:
        """Idle threads end; a busy one ends after its work, or with the process if it never ends."""
        for _ in self._threads:
            self._work.put(None)


def run_all(hosts: Sequence[Host], fn: Callable[[Host], T], max_workers: int = MAX_WORKERS) -> list[Outcome[T]]:
    """Outcomes in the order of `hosts`."""
    if not hosts:
        return []
    pool = Pool(min(max_workers, len(hosts)))
    futures: list[Future[Outcome[T]]] = []
    try:
        futures = [pool.submit(outcome_of, h, fn) for h in hosts]
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        settle(futures)
        raise
    finally:
        pool.shutdown()


def settle(futures: Sequence[Future[Any]]) -> None:
    """After Ctrl-C: work not started is cancelled, work under way runs to its own end (a deploy's fall-back
    included: the threads are daemons, so leaving now would freeze a host mid-step). A second Ctrl-C stops
    waiting."""
    for f in futures:
        f.cancel()  # only those not started yet
    try:
        for f in futures:
            if not f.cancelled():
                f.exception()  # waits; the outcome itself was caught by outcome_of
    except KeyboardInterrupt:
        pass


def outcome_of(host: Host, fn: Callable[[Host], T]) -> Outcome[T]:
    """`fn(host)` on this thread, its failure caught and named."""
    start = time.monotonic()
    try:
        value = fn(host)
    except FleetError as exc:
        return Outcome(host, False, None, str(exc), time.monotonic() - start)
    except Exception as exc:  # an unexpected failure on one host must not hide the others
        return Outcome(host, False, None, f"{host.name}: {type(exc).__name__}: {exc}", time.monotonic() - start)
    return Outcome(host, True, value, None, time.monotonic() - start)
