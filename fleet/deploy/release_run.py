"""One release's life on a host, the same for a deploy, a node of a multi-node deploy, the router and tune:
opened (with an event), each attempt recorded, then made current (older ones pruned) or closed failed."""

from __future__ import annotations

from typing import Any

from fleet.deploy.results import Attempt
from fleet.errors import FleetError
from fleet.host.releases import Release, ReleaseStore
from fleet.outcomes import ReleaseStatus
from fleet.yamlfile import JsonObject


class ReleaseRun:
    def __init__(self, store: ReleaseStore, release: Release):
        self.store, self.release = store, release

    @classmethod
    def open(cls, store: ReleaseStore, release: Release, **opened: Any) -> ReleaseRun:
        """Create the release on the host (in progress) and log its "opened" event with `opened`."""
        store.open(release)
        store.event(release, {"step": "opened", **opened})
        return cls(store, release)

    def event(self, step: str, **detail: Any) -> None:
        self.store.event(self.release, {"step": step, **detail})

    def record(self, attempt: Attempt) -> None:
        """An attempt that ended, added to the release's manifest (saved at once) as --json writes it."""
        self.release.add_attempt(attempt.to_json())
        self.store.save(self.release)

    def succeed(self, rung: str, config: JsonObject, keep: int, **current: Any) -> str | None:
        """It served: ok, made current (a symlink swapped atomically), the oldest beyond `keep` pruned. Once
        current, the release stands: a failure to prune or log after that is returned as a note, not raised."""
        r = self.release
        r.served(rung, config)
        self.store.save(r)  # ok and "committing": a run that dies before `current` moves is finished by recovery
        self.store.mark_current(r)
        try:
            r.settled()
            self.store.save(r)
            self.store.prune(keep)
            self.store.event(r, {"step": "current", **current})
        except FleetError as exc:
            return f"release {r.id} is current; pruning or logging after it failed: {exc}"
        return None

    def fail(self) -> None:
        self.release.ended(ReleaseStatus.FAILED)
        self.store.save(self.release)
