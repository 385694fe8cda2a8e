"""A release's life (fleet.deploy.release_run) against a store that keeps what it is told, in order."""

from __future__ import annotations

from pathlib import Path

from fakesession import HOST, Here

from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cachestore import CacheStore
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt
from fleet.host.releases import ROUTER_ROOT, Release, ReleaseStore
from fleet.outcomes import ReleaseStatus


class Store:
    root, host = "/var/lib/fleet", HOST

    def __init__(self) -> None:
        self.log: list[tuple] = []

    def open(self, r: Release) -> None:
        self.log.append(("open", r.status))

    def save(self, r: Release) -> None:
        self.log.append(("save", r.status, len(r.attempts), *((r.committing,) if r.status == "ok" else ())))

    def event(self, r: Release, e: dict) -> None:
        self.log.append(("event", e))

    def mark_current(self, r: Release) -> None:
        self.log.append(("current", r.id))

    def prune(self, keep: int) -> tuple[list[str], list[Release]]:
        self.log.append(("prune", keep))
        return [], []


def _release() -> Release:
    return Release(id="r1", host="h", playbook="p", playbook_sha256="x", created="t")


def test_a_release_that_serves_is_saved_committing_made_current_saved_done_pruned_then_logged_current():
    store = Store()
    run = ReleaseRun.open(store, _release(), rungs=["a", "b"])  # type: ignore[arg-type]
    run.event("stop", rung="a")
    run.record(Attempt("a", "CUDA_OOM", "exit 1", 12.34))
    run.succeed("b", {"rung": "b"}, keep=5, tune=True)
    r = run.release
    assert (r.status, r.rung, r.config) == (ReleaseStatus.OK, "b", {"rung": "b"}) and r.finished
    assert r.attempts == [{"rung": "a", "outcome": "CUDA_OOM", "evidence": "exit 1", "seconds": 12.3}]
    assert store.log == [("open", "in-progress"), ("event", {"step": "opened", "rungs": ["a", "b"]}),
                         ("event", {"step": "stop", "rung": "a"}), ("save", "in-progress", 1),
                         ("save", "ok", 1, True), ("current", "r1"), ("save", "ok", 1, False), ("prune", 5),
                         ("event", {"step": "current", "tune": True})]


def test_a_release_that_fails_is_closed_and_never_made_current():
    store = Store()
    run = ReleaseRun.open(store, _release())  # type: ignore[arg-type]
    run.fail()
    assert run.release.status == ReleaseStatus.FAILED and run.release.finished
    assert not any(entry[0] in ("current", "prune") for entry in store.log)


def test_the_router_s_attempt_is_recorded_in_its_manifest_as_the_dict_it_wrote_before():
    import json

    store = Store()
    run = ReleaseRun.open(store, _release())  # type: ignore[arg-type]
    run.record(Attempt("router", "READY", "2+2= -> 4", 0))
    assert json.dumps(run.release.attempts) == ('[{"rung": "router", "outcome": "READY", "evidence": "2+2= -> 4", '
                                                '"seconds": 0}]')


def _key(sm: str) -> CacheKey:
    return CacheKey(sm=sm, gpu="G", driver="580", cuda="13.0", packages=(("sglang", "0.5.9"),), patches=(),
                    flags=(), env=(), venv="/root/ml-env")


def _served(store: ReleaseStore, n: int, key: CacheKey | None) -> ReleaseRun:
    run = ReleaseRun.open(store, Release(id=f"20261205T10000{n}Z-abcd", host=HOST.name, playbook="p",
                                         playbook_sha256="x", created="t"))
    run.release.keyed(key.digest if key else None)
    return run


def test_the_caches_no_kept_release_needs_go_when_the_releases_are_pruned(tmp_path: Path, monkeypatch) -> None:
    """Issue 49: the store's entries outlived every release that started under their key (bounded only by its
    32 GiB). Now the host's prune after a release serves drops the entries no release kept on any host needs. On
    the code before, the old key's entry stayed (checked)."""
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    caches = CacheStore.of_site()
    old, new, elsewhere = _key("90"), _key("100"), _key("120")
    caches.needs.started("sbx9", "20261204T000000Z-ffff", elsewhere.digest)  # a host not in this run
    caches.put(elsewhere, b"tar", "sbx9")
    store = ReleaseStore.on(Here(HOST), root=str(tmp_path / "fleet"))
    first = _served(store, 1, old)
    caches.needs.started(HOST.name, first.release.id, old.digest)  # as an attempt records it, before the put
    caches.put(old, b"tar", HOST.name)
    assert first.succeed("plain", {}, keep=1) is None
    assert caches.has(old)  # its release is current
    second = _served(store, 2, new)
    caches.needs.started(HOST.name, second.release.id, new.digest)
    caches.put(new, b"tar", HOST.name)
    assert second.succeed("plain", {}, keep=1) is None
    assert caches.has(old)  # the release before current is never pruned (where a rollback goes)
    third = _served(store, 3, new)
    assert third.succeed("plain", {}, keep=1) is None
    assert not caches.has(old) and caches.has(new) and caches.has(elsewhere)
    assert store.events(third.release.id)[-1]["caches_dropped"] == [old.digest]


def test_no_store_is_made_where_no_warm_start_ran_nor_pruned_by_the_router_s_releases(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    store = ReleaseStore.on(Here(HOST), root=str(tmp_path / "fleet"))
    assert _served(store, 1, None).succeed("plain", {}, keep=1) is None
    assert not (tmp_path / "state").exists()
    caches = CacheStore.of_site()
    caches.put(_key("90"), b"tar", HOST.name)
    router = ReleaseStore.on(Here(HOST), root=str(tmp_path / "fleet"))
    router.root = ROUTER_ROOT  # the router's releases: its unit starts no server of a key
    assert ReleaseRun(router, Release(id="r", host="h", playbook="p", playbook_sha256="x",
                                      created="t")).caches_kept([]) == []
    assert caches.has(_key("90"))
