"""What a run did to the sglang router's own unit, as typed values: the report `inv deploy` and `inv rollback
--router` print (the "router" object of `--json`, the router line of the table) and the events behind it.

Pure. Each kind of run prints the keys it always printed, in the same order (to_json).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from fleet.outcomes import SERVING, DeployStatus


@dataclass(frozen=True)
class RouterEvent:
    """One change to the router's worker list during a rollout (a replica taken out, put back, kept)."""

    t: float
    host: str
    step: str
    detail: str = ""

    def to_json(self) -> dict[str, float | str]:
        return {"t": self.t, "host": self.host, "step": self.step, "detail": self.detail}


@dataclass(frozen=True)
class RouterEnd:
    """How a router deploy or its fall-back ended (the report's status, release, evidence and error)."""

    status: DeployStatus = DeployStatus.FAILED
    release: str | None = None
    evidence: str | None = None
    error: str | None = None


class RouterRun(StrEnum):
    DEPLOY = "deploy"  # the router brought to the replicas that serve, after a rollout
    ROLLBACK = "rollback"  # inv rollback --router
    DRY_RUN = "dry-run"  # what the unit and env file would become
    DRY_RUN_FAILED = "dry-run-failed"
    INTERRUPTED = "interrupted"  # Ctrl-C while the router was brought to the replicas


_KEYS: dict[RouterRun, tuple[str, ...]] = {
    RouterRun.DEPLOY: ("host", "unit", "port", "policy", "status", "release", "workers", "error", "evidence",
                       "events"),
    RouterRun.ROLLBACK: ("host", "unit", "port", "status", "release", "workers", "error", "evidence"),
    RouterRun.DRY_RUN: ("host", "unit", "status", "config", "diff", "release", "unchanged", "evidence", "error"),
    RouterRun.DRY_RUN_FAILED: ("host", "status", "error"),
    RouterRun.INTERRUPTED: ("host", "status", "workers", "events", "error"),
}


@dataclass(frozen=True)
class RouterReport:
    """What one run did to the router's unit on its host. `recovered`: what recovery closed first under the
    lock (None when the run never took the lock). `config` and `diff`: a dry run's planned unit."""

    run: RouterRun
    host: str
    status: DeployStatus
    unit: str | None = None
    port: int | None = None
    policy: str | None = None
    release: str | None = None
    workers: tuple[str, ...] = ()
    error: str | None = None
    evidence: str | None = None
    events: tuple[RouterEvent, ...] = ()
    recovered: tuple[str, ...] | None = None
    config: dict[str, object] | None = None  # a dry run's: the router's flags as a release records them
    diff: str = ""
    unchanged: bool = False  # a dry run's: the router keeps running as it is, its workers synced through its API

    @property
    def serves(self) -> bool:
        return self.status in SERVING

    def shown_workers(self) -> list[str]:
        """The replicas the router routes to (a dry run: would route to)."""
        if self.workers:
            return list(self.workers)
        listed = (self.config or {}).get("workers", [])
        return [str(u) for u in listed] if isinstance(listed, list) else []

    def to_json(self) -> dict[str, object]:
        values: dict[str, object] = {
            "host": self.host, "unit": self.unit, "port": self.port, "policy": self.policy,
            "status": self.status, "release": self.release, "workers": list(self.workers), "error": self.error,
            "evidence": self.evidence, "events": [e.to_json() for e in self.events], "config": self.config,
            "diff": self.diff, "unchanged": self.unchanged}
        out = {k: values[k] for k in _KEYS[self.run]}
        if self.recovered is not None:
            out["recovered"] = list(self.recovered)
        return out


def worker_list(listed: object) -> tuple[str, ...]:
    """A router release's recorded workers as its manifest holds them (hand-edited: anything not a list of
    texts is dropped)."""
    return tuple(u for u in listed if isinstance(u, str)) if isinstance(listed, list) else ()
