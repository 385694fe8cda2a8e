"""The router's own deploy (fleet.multihost.router.RouterHooks._deploy) falls back to its previous release when
installing, restarting or checking the new one raises, not only when the check says no; and its fall-back
reports, never raises. The router host's connection and release store are stand-ins; the steps that change the
host are replaced by ones that raise as a full disk or a broken link would."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakesession import host_run
from routerbook import BOOK

from fleet import playbook
from fleet.errors import FleetError
from fleet.host.releases import Release, ReleaseStore
from fleet.inventory import load as load_inventory
from fleet.multihost import router as routing
from fleet.outcomes import DeployStatus, Outcome
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import CommandTimedOut, ConnectionLost

PREVIOUS = Release(id="20261203T100000Z-prev", host="sbx0", playbook="replicas", playbook_sha256="0" * 64,
                   created="2026-12-03T10:00:00Z", rung="router", status="ok")


class Store:
    point_back = ReleaseStore.point_back  # the real one, over this store's stand-ins

    def __init__(self, *args):
        pass

    def current(self):
        return PREVIOUS

    def current_id(self):
        return PREVIOUS.id


class Run:
    runs: list[Run] = []

    def __init__(self, release):
        self.release, self.failed, self.succeeded, self.events = release, False, False, []
        Run.runs.append(self)

    @classmethod
    def open(cls, store, release, **opened):
        return cls(release)

    def event(self, step, **detail):
        self.events.append(step)

    def record(self, attempt):
        pass

    def succeed(self, *args, **kwargs):
        self.succeeded = True

    def fail(self):
        self.failed = True


class Hooks(routing.RouterHooks):
    """The router's hooks whose `restore` puts a release back and serves (logged in `put_back`), or raises
    `restore_error`; `_ready` raises `ready_error`, answers `ready`, else checks as the library does."""

    put_back: list[str]
    restore_error: BaseException | None = None
    ready_error: BaseException | None = None
    ready = None

    def restore(self, conn, store, release):
        if self.restore_error is not None:
            raise self.restore_error
        self.put_back.append(release.id)
        return Outcome.READY, "2+2= -> 4 through the router"

    def _ready(self, conn):
        if self.ready_error is not None:
            raise self.ready_error
        return self.ready if self.ready is not None else super()._ready(conn)


@pytest.fixture
def hooks(tmp_path, monkeypatch):
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory/hosts.yaml").write_text("hosts:\n  r0: {address: 10.0.0.1}\n  sbx0: {address: 10.0.0.9}\n")
    path = tmp_path / "replicas.yaml"
    path.write_text(BOOK)
    book = playbook.load(path)
    host = load_inventory(tmp_path / "inventory/hosts.yaml").hosts["sbx0"]
    Run.runs = []
    # the session's files are empty: not the same unit, a new release
    monkeypatch.setattr(routing, "port_problem", lambda *a: None)
    monkeypatch.setattr(routing, "router_venv_problem", lambda *a: None)
    monkeypatch.setattr(routing.restore, "unit_problem", lambda *a: None)
    monkeypatch.setattr(routing.restore, "install", lambda *a: None)
    monkeypatch.setattr(routing.restore, "restart", lambda *a: None)
    h = Hooks(book, Path(path), host, ConnectOptions(), {"SGLANG_API_KEY": "k3y"}, lambda h, m: None,
              stores=lambda *a: Store())
    h.put_back = []
    return h, h.put_back, monkeypatch


def raises(exc):
    def step(*args, **kwargs):
        raise exc
    return step


@pytest.mark.parametrize("step,exc", [
    ("install", OSError(28, "No space left on device")),
    ("install", FleetError("sbx0: /etc/systemd/system/sglang-router.service did not verify after writing")),
    ("restart", FleetError("systemctl restart sglang-router: exit 1")),
    ("ready", ValueError("the router's /generate answered something that is not JSON")),
])
def test_a_step_that_raises_puts_the_previous_router_release_back(hooks, step, exc):
    h, put_back, monkeypatch = hooks
    if step == "ready":
        h.ready_error = exc
    else:
        monkeypatch.setattr(routing.restore, step, raises(exc))
    report = h._deploy(host_run(opened=Run.open), ["http://10.0.0.1:30000"], lambda m: None)
    assert report.status == DeployStatus.ROLLED_BACK and report.release == PREVIOUS.id, report
    assert put_back == [PREVIOUS.id] and Run.runs[0].failed and not Run.runs[0].succeeded
    assert type(exc).__name__ in str(report.error) and f"back on release {PREVIOUS.id}" in str(report.error)


def test_a_lost_link_leaves_the_release_in_progress_for_the_next_runs_recovery(hooks):
    h, put_back, monkeypatch = hooks
    monkeypatch.setattr(routing.restore, "restart", raises(ConnectionLost("sbx0: the link dropped")))
    with pytest.raises(ConnectionLost):
        h._deploy(host_run(opened=Run.open), ["http://10.0.0.1:30000"], lambda m: None)
    assert put_back == [] and not Run.runs[0].failed


def test_a_fall_back_that_raises_is_reported_not_raised(hooks):
    h, put_back, monkeypatch = hooks
    monkeypatch.setattr(routing.restore, "install", raises(OSError(28, "No space left on device")))
    h.restore_error = OSError(28, "No space left on device")
    report = h._deploy(host_run(opened=Run.open), ["http://10.0.0.1:30000"], lambda m: None)
    assert report.status != DeployStatus.OK and "the rollback failed too" in \
        str(report.error) and "OSError" in str(report.error)


def test_a_router_deploy_whose_move_of_current_lost_its_answer_names_what_serves(hooks):
    """The rename over `current` ran on the router host, its answer and the re-read were lost: the fall-back put
    the previous router release back and serves it, and `current` used to keep naming the failed release."""
    h, put_back, monkeypatch = hooks
    state = {"current": PREVIOUS}

    class LiveStore(Store):
        def current(self):
            return state["current"]

        def current_id(self):
            return state["current"].id

        def mark_current(self, release):
            state["current"] = release

    class Lost(Run):
        def succeed(self, *a, **k):
            state["current"] = self.release  # the rename ran on the router host ...
            raise CommandTimedOut("sbx0: `ln -s releases/...` did not finish within 120s")  # ... answer, re-read lost

    h.stores = lambda *a: LiveStore()
    h.ready = Outcome.READY, "2+2= -> 4"
    report = h._deploy(host_run(opened=Lost.open), ["http://10.0.0.1:30000"], lambda m: None)
    assert report.status == DeployStatus.ROLLED_BACK and put_back == [PREVIOUS.id]
    assert state["current"].id == PREVIOUS.id


def test_the_wait_for_a_new_router_to_answer_says_where_it_stands(hooks):
    """Issue 46, finding 5 (h-new24's hour): a new router release said `started with N replica(s)`, then nothing until
    its /health answered or budgets.ready ran out (120 s for llama-replicas): a slow start looked like a hang."""
    from ticking import Said

    h, put_back, monkeypatch = hooks
    said = Said()

    class Slow(Hooks):
        def _ready(self, conn):
            assert said.ticked.wait(10), said  # the router answers once where the wait stands was said
            return Outcome.READY, "2+2= -> 4 through the router"

    slow = Slow(h.book, h.book_path, h.host, h.opts, h.secrets, h.say, stores=h.stores)
    report = slow._deploy(host_run(opened=Run.open), ["http://10.0.0.1:30000"], said)
    assert report.status == DeployStatus.OK, report
    assert any(str(m).startswith("phase router ready: GET /health: ") and str(m).endswith(
        f"of {h.book.budgets.ready:.0f}s budget") for m in said), said
