"""Which server configuration `inv tune --slo` starts next, and the winner as a playbook rung (pure).

A trial is the playbook's base flags with some flags of the search space set. The search climbs one flag at a
time: from the best trial so far (the highest request rate kept under the SLO), every value of every flag not
tried yet, dimension by dimension; when none is left around it, it stops. A value that crashed a start is not
tried again in any trial (what this search has seen crash), so a crash costs only its own start. Each trial is
one start of the server: its load points run on it without a restart (fleet.deploy.loadsearch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from fleet.deploy.searchspace import Space
from fleet.playbook import FlagValue


@dataclass(frozen=True, slots=True)
class Trial:
    flags: tuple[tuple[str, FlagValue], ...]  # sorted by flag: the values set on top of the playbook's base

    @classmethod
    def of(cls, flags: Mapping[str, FlagValue]) -> Trial:
        return cls(tuple(sorted(flags.items())))

    def as_dict(self) -> dict[str, FlagValue]:
        return dict(self.flags)

    def name(self) -> str:
        parts = [f"{k}={v}" for k, v in self.flags]
        return "slo-" + ("-".join(p.replace("=", "-") for p in parts) if parts else "base")

    def differs_by(self, other: Trial) -> dict[str, FlagValue]:
        """The server flags that change from `other` to this trial (a restart is needed when any does)."""
        mine, theirs = self.as_dict(), other.as_dict()
        return {k: mine.get(k) for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)}


@dataclass(frozen=True, slots=True)
class Outcome:
    rate: float | None  # the highest request rate kept under the SLO; None: it served but kept none
    crashed: bool = False


def crashed_values(results: Mapping[Trial, Outcome], base: Trial) -> set[tuple[str, FlagValue]]:
    """Values to avoid: each trial that crashed names the values it set beyond the base (one flag changed from
    a configuration that started: that value; several: all of them, until a start clears one)."""
    bad: set[tuple[str, FlagValue]] = set()
    served: set[tuple[str, FlagValue]] = set()
    for trial, outcome in results.items():
        (bad if outcome.crashed else served).update(set(trial.flags) - set(base.flags))
    return bad - served


def best(results: Mapping[Trial, Outcome]) -> Trial | None:
    """The trial with the highest rate kept (ties: the first tried)."""
    kept = [(o.rate, i, t) for i, (t, o) in enumerate(results.items()) if o.rate is not None and not o.crashed]
    return max(kept, key=lambda x: (x[0], -x[1]))[2] if kept else None


def next_trial(space: Space, results: Mapping[Trial, Outcome], budget: int,
               defaults: Mapping[str, FlagValue] | None = None) -> Trial | None:
    """The next configuration to start (None: the budget is spent or nothing is left around the best).
    `defaults`: the playbook's base flags (a value they already give is the same configuration)."""
    base = Trial.of({})
    if len(results) >= budget:
        return None
    if base not in results:
        return base
    center = best(results) or base
    avoid = crashed_values(results, base)
    now = {**(defaults or {}), **center.as_dict()}
    for dim in space.dimensions:
        for value in dim.values:
            if now.get(dim.flag) == value:
                continue
            flags = {**center.as_dict(), dim.flag: value}
            candidate = Trial.of(flags)
            if candidate in results or any(item in avoid for item in candidate.flags):
                continue
            return candidate
    return None


def rung_yaml(trial: Trial, promise: str, rate: float, host: str) -> str:
    """The winner as a ladder rung, ready to paste into the playbook's `ladder:` (YAML text)."""
    rung = {"name": trial.name(),
            "description": f"inv tune --slo {promise}: {rate:.3g} req/s kept on {host}",
            "flags": trial.as_dict()}
    return yaml.safe_dump([rung], sort_keys=False, default_flow_style=None, width=120)
