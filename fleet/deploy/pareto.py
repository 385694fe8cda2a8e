"""The Pareto front of what the tune's load points served within the promise: output tokens a second per GPU (what
the box earns) against tokens a second one user sees (how fast each answer streams); a point is on the front when
no other is at least as good on both and better on one (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Served:
    trial: str  # the configuration's name
    rate: float  # requests per second offered
    per_gpu: float  # output tokens per second per GPU
    per_user: float  # tokens per second one streaming request sees


def front(points: Sequence[Served]) -> list[Served]:
    """The points no other dominates, from the fastest per user to the most per GPU."""
    out = [p for p in points
           if not any(q.per_gpu >= p.per_gpu and q.per_user >= p.per_user and (q.per_gpu, q.per_user) !=
                      (p.per_gpu, p.per_user) for q in points)]
    unique = {(p.per_gpu, p.per_user): p for p in reversed(out)}  # ties: the first measured
    return sorted(unique.values(), key=lambda p: (-p.per_user, p.per_gpu))
