"""The router's restore (fleet.multihost.router.RouterHooks.restore, used by its fall-back, its recovery and
`inv rollback --router`) puts files back by rename from the copies its writes kept, so a full disk cannot leave the
router unrestored; and a router rollback whose target does not serve puts back the release that served before
(fleet.multihost.router_rollback). The host's files are a dict; every step that would touch a host is a stand-in."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from fakesession import FakeSession
from routerbook import BOOK

from fleet import playbook
from fleet.host.releases import ROUTER_ROOT, Release, ReleaseStore
from fleet.host.service import ServiceError, sha256
from fleet.inventory import load as load_inventory
from fleet.multihost import router as routing
from fleet.multihost import router_rollback
from fleet.outcomes import DeployStatus, Outcome
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import CommandTimedOut

UNIT, ENV = "/etc/systemd/system/sglang-router.service", "/etc/fleet/sglang-router.env"
OLD = {UNIT: b"[Service]\nExecStart=/old\n", ENV: b"A=old\n"}
NEW = {UNIT: b"[Service]\nExecStart=/new\n", ENV: b"A=new\n"}


def _release(rid: str, files: dict[str, bytes]) -> Release:
    return Release(id=rid, host="sbx0", playbook="replicas", playbook_sha256="0" * 64, created="now", rung="router",
                   status="ok", files={p: {"sha256": sha256(d), "mode": "0o644"} for p, d in files.items()})


class Host:
    """The router host's files, and the copies write.sh kept beside them (by sha256); the disk is full."""

    def __init__(self, monkeypatch):
        self.files, self.kept, self.writes, self.renames = dict(NEW), {}, [], []
        for path, data in OLD.items():  # the new release's install kept what served
            self.kept[(path, sha256(data))] = data
        monkeypatch.setattr(routing.restore, "read_file", lambda conn, host, path: self.files.get(path))
        monkeypatch.setattr(routing.restore, "drop_ins", lambda conn, host, unit_path, every=False: [])
        monkeypatch.setattr(routing.restore, "put_back_kept", self.put_back_kept)
        monkeypatch.setattr(routing.restore, "write_atomic", self.write_atomic)

    def put_back_kept(self, conn, host, path, want):
        if (path, want) not in self.kept:
            return False
        self.renames.append(path)
        self.files[path] = self.kept[(path, want)]
        return True

    def write_atomic(self, conn, host, path, data, mode, keep=False):
        self.writes.append(path)
        raise ServiceError(f"writing {path}: No space left on device; the old file is untouched")


class Hooks(routing.RouterHooks):
    """The router's hooks, its generation through the router answering."""

    def _ready(self, conn):
        return Outcome.READY, "2+2= -> 4"


class Copies:
    """A release store that holds the release's own copies of its files (what verified_copies reads)."""

    def __init__(self, files):
        self.files = files

    def file(self, release, path):
        return self.files.get(path)


class RollingBack(Hooks):
    """A router rollback's hooks: nothing left behind to recover, no kept copies to drop, and `restore` answering
    from `verdicts` (release id -> verdict) and logging which release it put back."""

    def __init__(self, hooks, store, verdicts):
        super().__init__(hooks.book, hooks.book_path, hooks.host, hooks.opts, {}, hooks.say,
                         sessions=lambda host, opts: FakeSession(host), stores=lambda *a: store)
        self.verdicts, self.restored = verdicts, []

    def recover(self, conn, lock, say):
        return []

    def drop_kept(self, conn):
        pass

    def restore(self, conn, store, release):
        self.restored.append(release.id)
        return self.verdicts(release)


@pytest.fixture
def hooks(tmp_path, monkeypatch):
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory/hosts.yaml").write_text("hosts:\n  sbx0: {address: 10.0.0.9}\n")
    path = tmp_path / "replicas.yaml"
    path.write_text(BOOK)
    host = load_inventory(tmp_path / "inventory/hosts.yaml").hosts["sbx0"]
    h = Hooks(playbook.load(path), Path(path), host, ConnectOptions(), {}, lambda h, m: None)
    monkeypatch.setattr(routing, "stop_quietly", lambda *a: None)
    monkeypatch.setattr(routing, "daemon_reload", lambda *a: None)
    monkeypatch.setattr(routing.restore, "restart", lambda *a: None)
    return h


def test_the_router_s_restore_on_a_full_disk_renames_the_kept_copies_back(hooks, monkeypatch):
    host = Host(monkeypatch)
    old = _release("r1", OLD)
    assert hooks.restore(object(), Copies(OLD), old) == (Outcome.READY, "2+2= -> 4")
    assert host.files == OLD and sorted(host.renames) == sorted(OLD) and host.writes == []


def test_a_file_already_as_the_release_has_it_is_left_alone_on_a_full_disk(hooks, monkeypatch):
    """Found by the many-host fault harness (rolling, full at the router's install): the new unit went in, the env
    had not yet, the disk filled. The unit goes back by rename, the env is neither renamed nor written."""
    host = Host(monkeypatch)
    host.files[ENV] = OLD[ENV]
    del host.kept[(ENV, sha256(OLD[ENV]))]
    restarted: list[str] = []
    monkeypatch.setattr(routing.restore, "restart", lambda conn, h, unit: restarted.append(unit))
    assert hooks.restore(object(), Copies(OLD), _release("r1", OLD)) == (Outcome.READY, "2+2= -> 4")
    assert host.files == OLD and host.renames == [UNIT] and host.writes == [] and restarted == ["sglang-router"]


def test_a_file_neither_kept_nor_writable_is_an_install_failure_not_a_crash(hooks, monkeypatch):
    host = Host(monkeypatch)
    host.kept.clear()
    restarted: list[str] = []
    monkeypatch.setattr(routing.restore, "restart", lambda conn, h, unit: restarted.append(unit))
    with pytest.raises(ServiceError, match="No space left"):
        hooks.restore(object(), Copies(OLD), _release("r1", OLD))
    assert host.writes == [UNIT] and restarted == []  # not started on half its files


def test_a_router_rollback_whose_target_does_not_serve_puts_back_what_served(hooks):
    current, target = _release("r2", NEW), _release("r1", OLD)
    moved: list[str] = []

    class Store:
        def current(self):
            return current

        def last_good_before_current(self):
            return target

        point_back = ReleaseStore.point_back  # the real one, over this store's stand-ins

        def current_id(self):
            return current.id

        def mark_current(self, release):
            moved.append(release.id)

    rolling = RollingBack(hooks, Store(), lambda release: (Outcome.READY, "2+2= -> 4") if release.id == "r2"
                          else (Outcome.HANG, "no answer in 30 s"))
    report = router_rollback.rollback(rolling, None)
    assert rolling.restored == ["r1", "r2"] and moved == []
    assert report.status == DeployStatus.FAILED and report.release == "r2"
    assert "router release r1 did not serve: HANG" in report.error
    assert report.error.endswith("back on router release r2, serving")


def test_a_router_rollback_whose_move_of_current_lost_its_answer_names_what_serves_again(hooks):
    """The rename over `current` ran on the router host but its answer timed out (and reading `current` again did
    not answer either): the release that served before goes back and serves, and `current` used to keep naming the
    target, so the next recovery would have put the target back. `current` is pointed back at what serves."""
    state = {"current": _release("r2", NEW)}
    moves: list[str] = []

    class Store:
        def current(self):
            return state["current"]

        point_back = ReleaseStore.point_back  # the real one, over this store's stand-ins

        def current_id(self):
            return state["current"].id

        def last_good_before_current(self):
            return _release("r1", OLD)

        def mark_current(self, release):
            moves.append(release.id)
            state["current"] = release  # the mv ran on the host ...
            if release.id == "r1":
                raise CommandTimedOut("sbx0: `ln -s releases/r1 ...` did not end within 120s")  # ... no answer

    rolling = RollingBack(hooks, Store(), lambda release: (Outcome.READY, "4"))
    report = router_rollback.rollback(rolling, None)
    assert rolling.restored == ["r1", "r2"] and moves == ["r1", "r2"]
    assert state["current"].id == "r2" and report.release == "r2"
    assert "did not end within 120s" in report.error
    assert report.error.endswith("back on router release r2, serving")


def test_a_router_rollback_killed_before_its_move_of_current_is_put_back_by_the_next_recovery(hooks, monkeypatch):
    """Killed after its target's files were put back and the router restarted, before `current` moved: a router
    rollback leaves no release in progress, and recovery used to act only on one, so the router ran r1's files
    while `current` named r2, for good. Recovery now puts back `current`'s files wherever the unit runs others."""
    host = Host(monkeypatch)
    host.files = dict(OLD)  # the rollback to r1 had put r1's files back; then SIGKILL
    before = _release("r2", NEW)
    host.kept = {(p, sha256(d)): d for p, d in NEW.items()}  # what the rollback's writes kept

    def answer(command):
        """sha256sum of the router host's files; no temporary file left, no release committing nor in progress (a
        rollback opens none)."""
        if command.startswith("sha256sum -- "):
            return 0, "".join(f"{sha256(d)}  {p}\n" for p, d in host.files.items() if p in command)
        return 0, ""

    class Store(Copies):
        root, session = ROUTER_ROOT, FakeSession(answer=answer)

        def current(self):
            return before

    hooks.stores = lambda *a: Store(NEW)
    notes = hooks.recover(None, SimpleNamespace(recovered=None), lambda m: None)
    assert host.files == NEW and "router release r2 put back and restarted" in notes
