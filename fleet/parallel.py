"""Run one function per host on a bounded pool; every host gets an outcome, none hides another's.

The pool's threads are daemons: a host stuck past every deadline (or abandoned by --host-timeout) costs its
thread, never the run's end. concurrent.futures' own pool joins its threads when the interpreter exits, so
one stuck host would keep `inv` from ever exiting."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fleet.errors import ConnectError, FleetError, NotReached
from fleet.inventory import Host

T = TypeVar("T")
MAX_WORKERS = 32
WAKE_S = 0.2  # the longest the main thread waits without looking for a Ctrl-C


@dataclass
class HostOutcome(Generic[T]):
    """How one host's call in a parallel run ended: its value, or the one-line error that stopped it."""

    host: Host
    ok: bool
    value: T | None
    error: str | None
    seconds: float
    unreached: NotReached | None = None  # why the host was not reached, when that is what stopped it


class Pool:
    """At most `workers` daemon threads, started as work comes; submit() returns a Future. abandon() gives
    up on one busy thread: one more may start, so queued work never waits on a host given up on."""

    def __init__(self, workers: int = MAX_WORKERS, name: str = "fleet-host"):
        self._limit, self._name = max(1, workers), name
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = self._queued = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any, future: Future[T] | None = None) -> Future[T]:
        """Queue fn(*args); `future` is one the caller made and recorded first (so a Ctrl-C between the submit and
        the caller's bookkeeping cannot leave work running that nobody tracks)."""
        future = future if future is not None else Future()
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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during run_all: each host's outcome as it stood when the wait ended, in the order of the hosts (None:
    not started, or still under way when a second Ctrl-C stopped the wait)."""

    def __init__(self, outcomes: list[Any]) -> None:
        super().__init__()
        self.outcomes = outcomes


class PartlyDone(KeyboardInterrupt):
    """Ctrl-C during a task that reads many hosts (probe, status): a row for every host, those that answered as
    they answered and the others saying they were interrupted, for the caller to show before it exits 130."""

    def __init__(self, rows: list[Any]) -> None:
        super().__init__()
        self.rows = rows


INTERRUPTED_ROW = "interrupted (Ctrl-C) before it answered"  # the error of a host a Ctrl-C left unread


DEPLOY_ENDS = ("a deploy that has changed nothing yet stops before it does; one that fails falls back to the "
               "release before")  # what the work under way does at its end
DEPLOY_LEFT = "the next deploy or rollback there takes over its lock and recovers what it left"  # and if left
STEP_ENDS = "each ends the step under way on its own"  # any other run on hosts (a probe, a patch, an audit)
STEP_LEFT = "what they were doing ends with this run"

_STOPPING = threading.Event()  # run_all took a Ctrl-C: work under way that has changed nothing yet stops there


def stopping() -> bool:
    """The operator pressed Ctrl-C during run_all: work under way that has not changed its host yet stops before
    it does (a deploy asks before its venv build and before its release opens)."""
    return _STOPPING.is_set()


def stop_starting() -> None:
    """A Ctrl-C taken outside run_all (a rollout's batches): the same request to the work under way, which stops
    before its first change where it has made none (it went on to restart a server the operator meant to spare)."""
    _STOPPING.set()


def no_stop_yet() -> None:
    """A run begins on the main thread: no Ctrl-C taken yet (an earlier run's is forgotten)."""
    if threading.current_thread() is threading.main_thread():
        _STOPPING.clear()


_told: list[Callable[[str], None]] = []  # where a Ctrl-C is answered when run_all's caller names no `notice`


def tell_interrupts_to(notice: Callable[[str], None] | None) -> None:
    """Where every run_all answers a Ctrl-C at once when its caller names no `notice` (the CLI: stderr); None: to
    nobody. A task that never says so still answers its operator's Ctrl-C, not only a deploy (issue 46, finding 4)."""
    _told[:] = [notice] if notice else []


def run_all(hosts: Sequence[Host], fn: Callable[[Host], T], max_workers: int = MAX_WORKERS,
            notice: Callable[[str], None] | None = None, ends: str = STEP_ENDS,
            left: str = STEP_LEFT, name_of: Callable[[Host], str] = lambda h: h.name) -> list[HostOutcome[T]]:
    """Outcomes in the order of `hosts`. Ctrl-C: no host starts any more, those under way end on their own (a
    second Ctrl-C stops waiting for them), then Interrupted with the outcomes; `notice` is told each step at once,
    with how the work under way `ends` and what becomes of work `left` by a second Ctrl-C, each host as `name_of`
    names it (a multi-node deployment's one run: every node)."""
    if not hosts:
        return []
    notice = notice or next(iter(_told), None)
    no_stop_yet()
    pool = Pool(min(max_workers, len(hosts)))
    futures: list[Future[HostOutcome[T]]] = []
    try:
        for h in hosts:  # each future recorded before it is queued, so a Ctrl-C here still settles all that may run
            futures.append(Future())
            pool.submit(outcome_of, h, fn, future=futures[-1])
        while not all(f.done() for f in futures):  # short waits: a Ctrl-C is taken at once, however it came
            wait(futures, timeout=WAKE_S)
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        _STOPPING.set()
        try:  # a second Ctrl-C anywhere from here on (the notice's own write included) means: stop waiting
            busy = [name_of(h) for h, f in zip(hosts, futures, strict=False) if f.running()]
            if notice:
                notice("Ctrl-C: no host starts now; " + (f"waiting for {', '.join(busy)} to end the step under way "
                       f"({ends}); Ctrl-C again to stop waiting" if busy else "nothing was under way"))
            waited_all = settle(futures)
        except KeyboardInterrupt:
            waited_all = False
        if not waited_all and notice:
            hosts_left = [name_of(h) for h, f in zip(hosts, futures, strict=False) if not f.done()]
            notice(f"Ctrl-C again: stopped waiting for {', '.join(hosts_left)}; {left}" if hosts_left else
                   "Ctrl-C again: every host had ended its step by then; nothing was left to stop")
        done = [f.result() if f.done() and not f.cancelled() else None for f in futures]
        raise Interrupted(done + [None] * (len(hosts) - len(done))) from None
    finally:
        pool.shutdown()


def settle(futures: Sequence[Future[Any]]) -> bool:
    """After Ctrl-C: work not started is cancelled, work under way runs to its own end (a deploy's fall-back
    included: the threads are daemons, so leaving now would freeze a host mid-step). A second Ctrl-C stops
    waiting (False)."""
    try:
        for f in futures:
            f.cancel()  # only those not started yet
        for f in futures:
            if not f.cancelled():
                f.exception()  # waits; the outcome itself was caught by outcome_of
    except KeyboardInterrupt:
        return False
    return True


def outcome_of(host: Host, fn: Callable[[Host], T]) -> HostOutcome[T]:
    """`fn(host)` on this thread, its failure caught and named."""
    start = time.monotonic()
    try:
        value = fn(host)
    except FleetError as exc:
        return HostOutcome(host, False, None, str(exc), time.monotonic() - start,
                           exc.cause if isinstance(exc, ConnectError) else None)
    except Exception as exc:  # an unexpected failure on one host must not hide the others
        return HostOutcome(host, False, None, f"{host.name}: {type(exc).__name__}: {exc}", time.monotonic() - start)
    return HostOutcome(host, True, value, None, time.monotonic() - start)


# ---------------------------------------------------------------------- Ctrl-C at safe points
# A KeyboardInterrupt raised in the main thread lands at any bytecode, paramiko's included: between a lock's
# acquire() and the try that releases it (e.g. Transport._send_user_message's clear_to_send_lock), or half-way
# through a packet; what follows on that connection, the fall-back included, may then wait for ever. So work
# that changes a host runs on a worker thread (`on_worker`), which no signal reaches; the operator's Ctrl-C is a
# request that the work takes at its next `checkpoint()`, inside an `interruptible()` region, between exchanges.
_STOP = threading.Event()  # the operator pressed Ctrl-C while on_worker waited
_TAKEN = threading.Event()  # the work took it (raised once; its own clean-up is never interrupted again)
_CALLS: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()  # on_main's, for the main thread
_local = threading.local()


def on_worker(fn: Callable[[], T], busy: Callable[[], str] = lambda: "", ends: str = STEP_ENDS,
              left: str = STEP_LEFT) -> T:
    """fn() on a daemon thread, this (main) thread only waiting (and answering on_main). The first Ctrl-C asks fn
    to stop (it takes the request at its next checkpoint, puts back what it took and ends with KeyboardInterrupt);
    the wait goes on. A second Ctrl-C stops waiting (KeyboardInterrupt here; fn's thread ends with the process).
    Each is answered at once where interrupts are told (tell_interrupts_to), naming what `busy` says is under way,
    how it `ends` and what a second leaves: a tune's load point (up to 600 s) showed nothing until it ended."""
    _STOP.clear()
    _TAKEN.clear()
    pool = Pool(1, "fleet-work")
    notice = next(iter(_told), None)
    try:
        future = pool.submit(fn)
        try:
            return waited(future)
        except KeyboardInterrupt:
            _STOP.set()
            who = busy() or "the work"
            if notice:
                notice(f"Ctrl-C: no host starts now; waiting for {who} to end the step under way ({ends}); Ctrl-C "
                       "again to stop waiting")
        try:
            return waited(future)
        except KeyboardInterrupt:
            if notice and not future.done():  # done: the work took the first one and ended so
                notice(f"Ctrl-C again: stopped waiting for {who}; {left}")
            raise
    finally:
        pool.shutdown()


def waited(future: Future[T]) -> T:
    """The work's result, running what it asks of the main thread meanwhile. Short waits: a Ctrl-C whose signal
    reached another thread (or _thread.interrupt_main, which wakes no wait) is taken within WAKE_S."""
    ended = threading.Event()  # read without a lock: the future's own condition is never taken while waiting
    future.add_done_callback(lambda _: ended.set())
    while not ended.is_set():
        try:
            call, answer = _CALLS.get(timeout=WAKE_S)
        except queue.Empty:
            continue
        try:
            answer.set_result(call())
        except BaseException as exc:  # noqa: BLE001 - the work gets it; a Ctrl-C is the operator's, here too
            answer.set_exception(exc)
            if isinstance(exc, KeyboardInterrupt):
                raise
    return future.result()


def on_main(fn: Callable[[], T]) -> T:
    """fn() on the main thread while on_worker waits there (a question at the terminal: a Ctrl-C at it is taken
    there, and the work gets KeyboardInterrupt at once, nothing changed); on the main thread, fn() itself."""
    if threading.current_thread() is threading.main_thread():
        return fn()
    answer: Future[T] = Future()
    _CALLS.put((fn, answer))
    return answer.result()


@contextmanager
def interruptible() -> Iterator[None]:
    """A region of work on on_worker's thread where checkpoint() may take the operator's Ctrl-C."""
    before = getattr(_local, "on", False)
    _local.on = True
    try:
        yield
    finally:
        _local.on = before


def checkpoint() -> None:
    """Raise the operator's Ctrl-C here, once, inside an interruptible() region; elsewhere nothing."""
    if getattr(_local, "on", False) and _STOP.is_set() and not _TAKEN.is_set():
        _TAKEN.set()
        raise KeyboardInterrupt
