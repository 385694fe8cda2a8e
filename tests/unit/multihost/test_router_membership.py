"""The router lists every replica that serves and only those (fleet.multihost.router's membership), whatever
this run did to each: a replica rolled back to a release that serves stays in, a run on one replica keeps the
others, a release every replica rolled back from still routes to all of them. The live router and the router
host's connection are stand-ins; the rule under test is the library's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakesession import FakeSession
from routerbook import BOOK

from fleet import playbook
from fleet.deploy.results import DeployResult
from fleet.errors import FleetError
from fleet.inventory import load as load_inventory
from fleet.multihost import router as routing
from fleet.multihost import router_plan
from fleet.multihost.router_report import RouterEnd
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions

INVENTORY = "hosts:\n" + "".join(f"  r{i}: {{address: 10.0.0.{i + 1}}}\n" for i in range(4)) + \
    "  sbx0: {address: 10.0.0.9}\n"


def url(i: int) -> str:
    return f"http://10.0.0.{i + 1}:30000"


class Live:
    """The router's live worker list and which replicas answer /health."""

    def __init__(self, workers: list[str] | None, serving: set[str]):
        self.list, self.serving = workers, serving
        self.calls: list[tuple[str, str]] = []

    def workers(self):
        return None if self.list is None else list(self.list)

    def serves(self, u, conn=None):
        return u in self.serving

    def add(self, u):
        self.calls.append(("add", u))
        assert self.list is not None
        self.list.append(u)
        return 200, "ok"

    def remove(self, u):
        self.calls.append(("remove", u))
        assert self.list is not None
        self.list.remove(u)
        return 200, "ok"


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "hosts.yaml").write_text(INVENTORY)
    inv = load_inventory(tmp_path / "inventory" / "hosts.yaml").hosts
    path = tmp_path / "replicas.yaml"
    path.write_text(BOOK)
    book = playbook.load(path)
    deployed: list[list[str]] = []

    class Hooks(routing.RouterHooks):
        def recover(self, conn, lock, say):
            return []  # nothing left behind

        def _deploy(self, conn, workers, say):
            deployed.append(workers)
            return RouterEnd(DeployStatus.OK, "r-new")

    def make(live: Live, say=lambda h, m: None, **seams):
        hooks = Hooks(book, Path(path), inv["sbx0"], ConnectOptions(), {}, say, **seams)
        hooks.live = live  # type: ignore[assignment]
        hooks.sessions = lambda host, opts: FakeSession(host)
        hooks.running = live.list is not None
        return hooks

    replicas = [inv[f"r{i}"] for i in range(4)]
    return make, replicas, deployed


def result(host, status):
    return DeployResult(host.name, status)


def test_members_are_what_serves_sorted_whatever_order_the_router_listed():
    known = [url(3), url(2), url(0), "http://evil;rm -rf /:1"]
    serves = {url(0): True, url(1): True, url(2): False, url(3): True}
    assert router_plan.members(known, [url(1), url(0)], serves) == [url(0), url(1), url(3)]
    assert router_plan.members([], [url(0)], {}) == []


@pytest.mark.parametrize("bad", ["http://a b:1", "https://x:1", "http://x:1/p", "http://-x:1", "file:///etc",
                                 "http://x:123456", 7, None])
def test_a_worker_url_a_host_sent_is_called_only_in_worker_url_shape(bad):
    assert not router_plan.is_worker_url(bad)
    assert router_plan.is_worker_url("http://[fe80::1%eth0]:30000") and router_plan.is_worker_url(url(0))


def test_a_replica_rolled_back_to_a_release_that_serves_goes_back_in(setup):
    make, replicas, _ = setup
    live = Live([url(1), url(2), url(3)], serving={url(0), url(1), url(2), url(3)})  # r0 taken out, rolled back
    hooks = make(live)
    hooks.after(replicas[0], result(replicas[0], DeployStatus.ROLLED_BACK))
    assert live.calls == [("add", url(0))] and url(0) in live.list


def test_a_replica_whose_server_answers_nothing_stays_out(setup):
    make, replicas, _ = setup
    live = Live([url(0), url(1)], serving={url(1)})
    make(live).after(replicas[0], result(replicas[0], DeployStatus.FAILED))
    assert live.list == [url(1)]


def test_a_run_on_one_replica_keeps_the_others_in_the_router(setup):
    make, replicas, deployed = setup
    live = Live([url(0), url(1), url(2), url(3)], serving={url(0), url(1), url(2), url(3)})
    report = make(live).finish([replicas[1]], [result(replicas[1], DeployStatus.OK)])
    assert deployed == [[url(0), url(1), url(2), url(3)]] and list(report.workers) == deployed[0]


def test_a_release_every_replica_rolled_back_from_still_routes_to_all_of_them(setup):
    make, replicas, deployed = setup
    live = Live([url(0), url(1), url(2), url(3)], serving={url(0), url(1), url(2), url(3)})
    report = make(live).finish(replicas, [result(h, DeployStatus.ROLLED_BACK) for h in replicas])
    assert report.status == DeployStatus.OK and report.error is None
    assert deployed == [[url(0), url(1), url(2), url(3)]]


def test_a_rollout_stopped_by_max_fail_keeps_the_replicas_it_never_reached(setup):
    make, replicas, deployed = setup
    live = Live([url(1), url(2), url(3)], serving={url(1), url(2), url(3)})  # r0 failed and serves nothing
    statuses = [DeployStatus.FAILED, DeployStatus.OK, DeployStatus.SKIPPED, DeployStatus.SKIPPED]
    make(live).finish(replicas, [result(h, s) for h, s in zip(replicas, statuses, strict=True)])
    assert deployed == [[url(1), url(2), url(3)]]


def test_a_router_that_does_not_answer_keeps_the_workers_of_its_release_that_serve(setup):
    make, replicas, deployed = setup

    class Store:
        def current(self):
            return type("R", (), {"config": {"workers": [url(0), url(2), 5, "http://x y:1"]}})()

    hooks = make(Live(None, serving={url(0), url(1)}), stores=lambda *a: Store())
    hooks.finish([replicas[1]], [result(replicas[1], DeployStatus.OK)])
    assert deployed == [[url(0), url(1)]]


def test_with_no_replica_serving_the_router_is_left_as_it_was(setup):
    make, replicas, deployed = setup
    report = make(Live([url(0)], serving=set())).finish(replicas[:1], [result(replicas[0], DeployStatus.FAILED)])
    assert deployed == [] and "no replica serves; the router was left as it was" in report.error


def test_a_live_list_of_the_wrong_shape_is_data_not_a_crash(setup):
    make, replicas, deployed = setup
    live = Live([url(0)], serving={url(0), url(1)})
    live.list = [{"url": "x"}, ["y"], 7, None, url(0), "http://a b:1"]  # type: ignore[list-item]
    make(live).finish([replicas[1]], [result(replicas[1], DeployStatus.OK)])
    assert deployed == [[url(0), url(1)]]


def test_a_replica_an_operation_started_again_goes_back_in_once_it_answers_and_not_before(setup):
    """back_in after `inv recover` or a patch's put-back (issue 52): the server starts again only after the
    operation, so the replica is put back once its /health answers, within the wait; never before it does."""
    make, replicas, _ = setup
    r0 = replicas[0]
    live = Live([url(1)], set())
    hooks = make(live)
    looks: list[float] = []

    def sleep(s: float) -> None:  # the server answers after the third look
        looks.append(s)
        if len(looks) == 3:
            live.serving.add(url(0))

    routing.back_in(hooks, r0, DeployStatus.FAILED, wait=60, sleep=sleep)
    assert len(looks) == 3 and live.calls == [("add", url(0))] and live.list == [url(1), url(0)]

    live = Live([url(1)], set())  # never answers: not put back, whatever the wait
    routing.back_in(make(live), r0, DeployStatus.FAILED, wait=0.05, sleep=lambda s: None)
    assert live.calls == [] and live.list == [url(1)]


def test_a_replica_not_taken_out_is_never_removed_for_a_missed_health_check(setup):
    """`inv patch -p` (issue 52): a busy replica that misses /health twice stays in when nothing took it out."""
    make, replicas, _ = setup
    live = Live([url(0), url(1)], serving={url(1)})  # r0 is busy: its /health does not answer in time
    routing.back_in(make(live), replicas[0], DeployStatus.FAILED, wait=0.0, sleep=lambda s: None)
    assert live.calls == [] and live.list == [url(0), url(1)]
    live = Live([url(1)], serving={url(0), url(1)})  # one that serves and is out: added, as before
    routing.back_in(make(live), replicas[0], DeployStatus.FAILED, wait=0.0, sleep=lambda s: None)
    assert live.calls == [("add", url(0))]


class Unreadable(Live):
    def workers(self):
        return None  # a 503, an HTML page: no list


class RemoveFails(Live):
    def remove(self, u):
        self.calls.append(("remove", u))
        return 500, "internal error"


@pytest.mark.parametrize("live", [Unreadable([url(0), url(1)], {url(0), url(1)}),
                                  RemoveFails([url(0), url(1)], {url(0), url(1)})])
def test_a_strict_take_out_refuses_when_the_replica_is_not_shown_out(setup, live):
    """patch and recover: the stop does not go ahead while the router may still send the replica requests."""
    make, replicas, _ = setup
    hooks = make(live)
    said: list[str] = []
    with pytest.raises(FleetError) as exc:
        hooks.take_out(replicas[0], None, said.append, strict=True)
    assert "\n" not in str(exc.value) and "could not be shown out of the router" in str(exc.value)
    assert "nothing was stopped" in str(exc.value) and not hooks.taken_out(replicas[0])


def test_start_says_when_the_list_cannot_be_read(setup):
    make, _, _ = setup
    said: list[str] = []
    hooks = make(Unreadable(None, set()))
    hooks.say = lambda h, m: said.append(m)
    hooks.start()
    assert not hooks.running and said and "no worker list could be read" in said[0]


def test_a_router_that_answers_no_list_is_said_once_under_its_hosts_name(setup):
    """A newcomer's pass: `inv tune` of replicas whose router was not running said `sbx0 router: no worker list
    could be read from sbx0 (...)`: the line is its host's already (fleet.cli.deploy.host_say prefixes it)."""
    make, _, _ = setup
    said: list[tuple[str, str]] = []
    hooks = make(Live(None, serving=set()), say=lambda h, m: said.append((h, m)))
    hooks.start()
    assert said == [("sbx0", "router: no worker list could be read (not running, or it answered no list); "
                             "replicas are not taken out of it")]
