"""Run one function per host on a bounded pool; every host gets an outcome, none hides another's."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

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


def run_all(hosts: Sequence[Host], fn: Callable[[Host], T], max_workers: int = MAX_WORKERS) -> list[Outcome[T]]:
    """Outcomes in the order of `hosts`."""
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(hosts)))) as pool:
        return list(pool.map(lambda h: outcome_of(h, fn), hosts))


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
