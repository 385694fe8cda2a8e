"""A release's life (fleet.deploy.release_run) against a store that keeps what it is told, in order."""

from __future__ import annotations

from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt
from fleet.host.releases import Release
from fleet.outcomes import ReleaseStatus


class Store:
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

    def prune(self, keep: int) -> list[str]:
        self.log.append(("prune", keep))
        return []


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
