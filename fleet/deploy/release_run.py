"""One release's life on a host, the same for a deploy, a node of a multi-node deploy, the router and tune:
opened (with an event), each attempt recorded, then made current (older ones pruned, and the controller's cache
entries no kept release needs any more with them) or closed failed."""

from __future__ import annotations

from typing import Any

from fleet.deploy.cachestore import CacheStore
from fleet.deploy.results import Attempt
from fleet.errors import FleetError
from fleet.host.releases import ROUTER_ROOT, Release, ReleaseStore
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
            _, kept = self.store.prune(keep)
            dropped = self.caches_kept(kept)
            self.store.event(r, {"step": "current", **current, **({"caches_dropped": dropped} if dropped else {})})
        except (FleetError, OSError) as exc:
            return f"release {r.id} is current; pruning or logging after it failed: {exc}"
        return None

    def caches_kept(self, kept: list[Release]) -> list[str]:
        """The host's releases were pruned: the controller's cache entries no release kept on any host needs are
        dropped (the digests dropped). Nothing is written where no warm start ever ran (no store), nor for the
        router's releases (its own folder: its unit starts no server of a key)."""
        caches = CacheStore.of_site()
        if self.store.root == ROUTER_ROOT or not caches.root.is_dir():
            return []
        return caches.releases_kept(self.store.host.name, {k.id: k.cache_key for k in kept})

    def fail(self, status: ReleaseStatus = ReleaseStatus.FAILED) -> None:
        """Closed as `status`: failed, or interrupted (Ctrl-C ended it, as the next run's recovery says of a run
        that died)."""
        self.release.ended(status)
        self.store.save(self.release)
