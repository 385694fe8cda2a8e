"""Data-parallel replicas behind sglang's router (a playbook's `router:` section).

Every host the playbook is deployed on is a replica (the usual per-host deploy, in rolling batches). The
router (`python -m sglang_router.launch_router ...`) is its own systemd unit on `router.host` (enabled: a reboot
starts it), a release of its own under /var/lib/fleet/router (so a replica's host can be the router's host too):

- before a replica's server stops (its first attempt), the replica is taken out of the live router and its
  running requests drain; once its deploy ends healthy it is put back (the router checks its health first),
  each done once the router's listing shows it, in the API of the router's release (router_api). A rollback of
  replicas (rolling, in batches: the roll-out's `job`), a tune and a bench (fleet.multihost.tune) take it out
  and put it back through the same `take_out` and `after`. Membership follows what serves, not what the run
  did: a replica rolled back to a release that serves goes back in; one whose server answers nothing stays out.
- after the replicas, on every path (an interrupt too), the router's membership is every replica that answers
  /health (this run's and those it already routed to, so `--host r1` keeps the others). A router that serves
  and whose own configuration is unchanged keeps running: its unit names the workers it started with, and its
  live list is synced through its API (so a replica's order or absence never restarts it). Else the unit is
  installed atomically, restarted and checked with a real generation through it (which a replica must
  answer), falling back to its previous release.

The router calls replicas over the network, so replicas listen beyond loopback with serve.api_key; the
router gets the same key (`--api-key`): clients need it, and the replicas it starts with inherit it.
Replicas added later are given it explicitly (`api_key` with the URL), as sgl-router requires."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

from fabric import Connection

from fleet.deploy import boot, fallback, recovery, restore
from fleet.deploy.hostrun import HostRun, host_run
from fleet.deploy.ladder import Deployer
from fleet.deploy.preflight import port_problem, router_venv_problem
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt, DeployResult
from fleet.errors import FleetError
from fleet.host import curl as hostcurl
from fleet.host import lock as hostlock
from fleet.host.journal import journal_tail
from fleet.host.releases import CURRENT_TEMP, ROUTER_ROOT, Release, ReleaseStore, new_id, now
from fleet.host.service import daemon_reload, drop_kept, sha256, stop_quietly, unit_state
from fleet.host.session import ConnectionLost, HostSession, one_line
from fleet.inventory import Host
from fleet.multihost import router_api
from fleet.multihost.router_live import LiveRouter
from fleet.multihost.router_plan import (
    curl,
    env_path,
    is_worker_url,
    members,
    plan,
    router_host,
    running_requests,
    unit_path,
    worker_url,
)
from fleet.multihost.router_report import RouterEnd, RouterEvent, RouterReport, RouterRun, worker_list
from fleet.outcomes import SERVING, DeployStatus, Outcome, ServerVerdict
from fleet.playbook import Playbook
from fleet.progress import Progress, standing, ticking
from fleet.ssh.connect import ConnectOptions

HostSay = Callable[[str, str], None]  # (host name, message)
MAX_WORKERS = 64  # workers a router's list may name that fleet asks after (each a /health of up to 5 s)


# ---------------------------------------------------------------------- hooks around the rolling deploy


@dataclass
class RouterHooks:
    """What a rolling deploy of a router playbook does besides the per-host deploys (see rolling.roll_out)."""

    book: Playbook
    book_path: Path
    host: Host  # the router's
    opts: ConnectOptions
    secrets: dict[str, str]
    say: HostSay
    live: LiveRouter = field(init=False)
    running: bool = False  # a router answered when the deploy began
    events: list[RouterEvent] = field(default_factory=list)
    _taken_out: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    sessions: Callable[[Host, ConnectOptions], HostSession] = HostSession.open  # the router host's (tests: a fake)
    stores: Callable[[Connection, Host, str], ReleaseStore] = ReleaseStore  # its release store (tests: a fake)

    def __post_init__(self) -> None:
        self.live = LiveRouter(self.host, self.book, self.opts)

    def _event(self, host: str, step: str, detail: str = "") -> None:
        with self._lock:
            self.events.append(RouterEvent(round(time.time(), 3), host, step, detail))

    def start(self) -> None:
        """Before any replica: is a router serving already (then replicas go out and back in one by one)?"""
        try:
            self.running, why = self.live.workers() is not None, "not running, or it answered no list"
        except FleetError as exc:
            self.running, why = False, f"cannot reach its host: {exc}"
        if not self.running:
            self.say(self.host.name, f"router: no worker list could be read ({why}); replicas are not taken out "
                                     "of it")  # said as the router host's line: its name leads it already

    def deployer(self, host: Host, book: Playbook, path: Path, opts: ConnectOptions, say: Progress,
                 secrets: dict[str, str]) -> Deployer:
        """A replica's deploy: out of the router before its server first stops."""
        return Deployer(host, book, path, opts, say, secrets, before_stop=lambda conn: self.take_out(host, conn, say))

    def take_out(self, host: Host, conn: Connection, say: Progress, strict: bool = False) -> None:
        """Once per replica, before its server stops: out of the router, then its running requests drain.
        `strict` (patch, recover): a replica not shown to be out (the router's list unreadable, a remove that
        failed) raises, so its server is not stopped while the router may still send it requests."""
        with self._lock:
            if host.name in self._taken_out:
                return
            self._taken_out.add(host.name)
        if not self.running and not strict:
            return
        url = worker_url(host, self.book)
        try:
            workers = self.live.workers()
            if workers is None and strict:
                raise FleetError("its worker list cannot be read (not running, or it answered no list)")
            if workers is None or url not in workers:
                return
            code, body = self.live.remove(url)
            if code not in router_api.DONE:
                raise FleetError(f"answered {code}: {body.strip()[:120]}")
        except FleetError as exc:
            if strict:
                raise self._not_out(host, url, str(exc)) from None
            say(f"router: could not take {url} out: {exc}")
            return
        self._event(host.name, "removed", url)
        say(f"taken out of the router on {self.host.name} before its server stops")
        if workers == [url]:
            say("warning: the router has no other replica: it cannot serve until this one is back "
                "(deploy more replicas, one batch at a time: --serial 1)")
        drain(conn, host, self.book, say)

    def _not_out(self, host: Host, url: str, why: str) -> FleetError:
        with self._lock:
            self._taken_out.discard(host.name)  # not out: a later look may try again
        return FleetError(f"{host.name}: not stopped: {url} could not be shown out of the router on "
                          f"{self.host.name} ({one_line(why, 160)}); fix the router, or go on without it "
                          "(no --playbook); nothing was stopped")

    def taken_out(self, host: Host) -> bool:  # this run took it out (or tried: its stop went ahead)
        with self._lock:
            return host.name in self._taken_out

    def after(self, host: Host, result: DeployResult) -> DeployResult:
        """A replica that serves (its deploy's release, or the one it rolled back to) goes (back) into a
        running router; one whose server answers nothing stays out."""
        url = worker_url(host, self.book)
        if not self.running:
            return result
        if result.status not in SERVING and self.live.serves(url):  # e.g. rolled back: its old release serves
            self._event(host.name, "serves", f"{result.status}: its previous release answers /health")
            self.say(host.name, f"its deploy ended {result.status}, but it serves (its previous release): "
                                "it stays in the router")
        elif result.status not in SERVING:  # its server does not answer: out until a deploy serves
            try:
                workers = self.live.workers()
                if workers is not None and url in workers:
                    self.live.remove(url)
            except FleetError:
                pass
            self._event(host.name, "left out", result.status)
            self.say(host.name, f"stays out of the router: its deploy ended {result.status}")
            return result
        try:
            workers = self.live.workers()
            if workers is not None and url in workers:
                self._event(host.name, "in router", url)
                return result
            code, body = self.live.add(url)
        except FleetError as exc:
            code, body = None, str(exc)
        if code in router_api.DONE:
            self._event(host.name, "added", url)
            self.say(host.name, f"back in the router on {self.host.name}: {body.strip()[:120]}")
        else:
            self._event(host.name, "add failed", f"{code}: {body.strip()[:200]}")
            self.say(host.name, f"router: adding {url} answered {code}: {body.strip()[:160]}")
        return result

    def finish(self, hosts: list[Host], results: list[DeployResult]) -> RouterReport:
        """After every batch, on every path (interrupts too): the router's own unit with every replica that
        serves, whatever this run did to it; left as it was only when no replica serves."""
        say = lambda m: self.say(self.host.name, f"router: {m}")  # noqa: E731
        recovered: list[str] | None = None
        workers: list[str] = []
        end = RouterEnd()
        try:
            with self.run(f"deploy router {self.book.name}", say) as run:
                recovered = run.recovered
                conn = run.session.conn
                workers = self.members(conn, hosts, results)
                if not workers:
                    end = RouterEnd(error=f"{self.host.name}: no replica serves; the router was left as it was")
                else:
                    try:
                        end = self._deploy(run, workers, say)
                    finally:
                        self.drop_kept(conn)
        except FleetError as exc:
            end = replace(end, error=str(exc))
        router = self.book.router
        assert router is not None  # RouterHooks are made for playbooks with a router section
        return RouterReport(RouterRun.DEPLOY, self.host.name, end.status, router.unit, router.port, router.policy,
                            end.release, tuple(workers), end.error, end.evidence, tuple(self.events),
                            None if recovered is None else tuple(recovered))

    def members(self, conn: Connection, hosts: list[Host], results: list[DeployResult]) -> list[str]:
        """Every replica that serves: this run's that served, and every other one (the router's live list,
        else its current release's) that answers /health now, so a run on some replicas keeps the rest."""
        try:
            known = self.live.workers()
        except FleetError:
            known = None
        if known is None:
            current = self.stores(conn, self.host, ROUTER_ROOT).current()
            known = list(worker_list(current.config.get("workers"))) if current else []
        known = [u for u in known if is_worker_url(u)][:MAX_WORKERS]  # what a host sent: URLs of our shape only
        ran = {worker_url(h, self.book): r for h, r in zip(hosts, results, strict=True)}
        serves = {u: (u in ran and ran[u].status in SERVING) or self.live.serves(u, conn)
                  for u in dict.fromkeys([*known, *ran])}
        return members(known, list(ran), serves)

    def _deploy(self, host_run: HostRun, workers: list[str], say: Progress) -> RouterEnd:
        book, host, conn = self.book, self.host, host_run.session.conn
        unit = book.router.unit  # type: ignore[union-attr]
        store = self.stores(conn, host, ROUTER_ROOT)
        previous = store.current()
        planned = plan(book, host, workers, self.secrets)
        if previous and self.keeps(conn, previous, workers, host_run.session.read):
            outcome, evidence = self._ready(conn)
            if outcome == Outcome.READY:
                self._reconcile(workers, say)
                say(f"release {previous.id} serves with its own configuration unchanged: its workers synced "
                    f"through its API; {evidence}")
                return RouterEnd(DeployStatus.UNCHANGED, previous.id, evidence)
        problem = (port_problem(conn, host, book.router.port, unit)  # type: ignore[union-attr]
                   or router_venv_problem(conn, host, planned.argv[0], book.serve.user)
                   or restore.unit_problem(conn, host, planned, unit_path(book)))
        if problem:
            return RouterEnd(error=f"{host.name}: router preflight: {problem}; nothing was changed")
        release = Release(id=new_id(), host=host.name, playbook=book.name,
                          playbook_sha256=sha256(self.book_path.read_bytes()),
                          created=now(), rung="router", config=planned.config)
        run = host_run.open_release(store, release, workers=workers)
        try:
            restore.install(conn, host, store, release, planned, unit_path(book), env_path(book))
            restore.restart(conn, host, unit)
            run.event("restarted")
            say(f"started with {len(workers)} replica(s): {' '.join(workers)}")
            with ticking(say, "router ready: GET /health", book.budgets.ready):  # it was silent up to that
                outcome, evidence = self._ready(conn)
            run.event("attempt", outcome=outcome, evidence=evidence)
            run.record(Attempt("router", outcome, evidence, 0))
            if outcome == Outcome.READY:
                run.succeed("router", planned.config, book.keep_releases)
                say(evidence)
                return RouterEnd(DeployStatus.OK, release.id, evidence)
        except ConnectionLost:
            raise  # the release stays in progress: the next run's recovery (`recover`) closes it
        except Exception as exc:  # install, restart or the check raised: the previous router goes back
            outcome, evidence = Outcome.INSTALL_FAILED, f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        say(f"{outcome}: {evidence}")
        return self._fall_back(conn, store, run, previous, f"{outcome}: {evidence}", say)

    def keeps(self, conn: Connection, previous: Release, workers: list[str],
              read: Callable[[str], bytes | None]) -> bool:
        """Whether the router's current release runs with its own configuration unchanged, active: its unit as
        rendered with the workers it started with (else with `workers`), its env file and key as installed. Such
        a router keeps running, its live list synced (the deploy and its dry run both go by this)."""
        book, host = self.book, self.host
        started = previous.config.get("workers")
        running = plan(book, host, [u for u in started if is_worker_url(u)] if isinstance(started, list) else workers,
                       self.secrets)
        return (read(unit_path(book)) == running.unit_text.encode()
                and read(env_path(book)) == running.env_text.encode()
                and restore.key_installed(conn, host, running)
                and unit_state(conn, host, book.router.unit).get("ActiveState") == "active")  # type: ignore[union-attr]

    def _ready(self, conn: Connection) -> ServerVerdict:
        """The router's port answers /health within budgets.ready, then a real generation passes through it."""
        unit = self.book.router.unit  # type: ignore[union-attr]
        self.live.forget_api()  # the router that answers may be another release's now
        deadline = time.monotonic() + self.book.budgets.ready
        while True:
            code, _ = hostcurl.answer(conn, self.host, curl(self.book, "GET", "/health", timeout=5), wait=40)
            if code == 200:
                return self.live.generate(conn)
            state = unit_state(conn, self.host, unit)
            if state.get("ActiveState") in ("failed", "inactive"):
                tail = journal_tail(conn, self.host, unit, 3)
                last = " | ".join(tail.splitlines())[:300]
                return Outcome.EXITED, f"the router exited ({state.get('Result', '?')}): {last}"
            if time.monotonic() > deadline:
                return Outcome.HANG, f"the router's /health did not answer within {self.book.budgets.ready:.0f}s"
            time.sleep(0.5)

    def _reconcile(self, workers: list[str], say: Progress) -> None:
        """An unchanged router keeps running: its live worker list is brought to the replicas that serve."""
        live = self.live.workers() or []
        for url in workers:
            if url not in live:
                code, body = self.live.add(url)
                say(f"added {url}: {code} {body.strip()[:100]}")
        for url in live:
            if url not in workers:
                code, body = self.live.remove(url)
                say(f"removed {url}: {code} {body.strip()[:100]}")

    def _fall_back(self, conn: Connection, store: ReleaseStore, run: ReleaseRun, previous: Release | None,
                   why: str, say: Progress) -> RouterEnd:
        """The new router did not serve: its previous release back byte for byte, else the unit stopped (the
        one fall-back, fleet.deploy.fallback), as the router's report."""
        fell = fallback.fall_back(RouterSteps(self, conn, store, run), previous, why, say)
        if fell.served_again:
            return RouterEnd(DeployStatus.ROLLED_BACK, fell.release, fell.evidence, fell.error)
        return RouterEnd(release=fell.release if previous else None, error=fell.error)

    def run(self, purpose: str, say: Progress) -> AbstractContextManager[HostRun]:
        """A run on the router's host (fleet.deploy.hostrun), recovering first what a dead router run left and
        dropping the copies its writes kept; it ends with its current release's unit enabled (fleet.deploy.boot)."""
        def recover(s: HostSession, lock: hostlock.Lock) -> list[str]:
            notes = self.recover(s.conn, lock, say)
            self.drop_kept(s.conn)  # a dead run's, used by the recovery above or stale
            return notes

        @contextmanager
        def run() -> Iterator[HostRun]:
            session = self.sessions(self.host, self.opts)
            try:
                with host_run(self.host, self.opts, purpose, unit=None, recover=recover, progress=say, session=session,
                              serving=boot.Serving(self.book.router.unit, ROUTER_ROOT)) as done:  # type: ignore[union-attr]
                    yield done
            finally:
                session.close()
        return run()

    def recover(self, conn: Connection, lock: hostlock.Lock, say: Progress) -> list[str]:
        """What a dead router run left under /var/lib/fleet/router, closed first under the lock: a release made
        current if it served and the unit runs its files, one in progress marked interrupted and, where the unit
        then runs other files than the current router release's (a dead deploy's or a dead rollback's), those put
        back and restarted (the run then goes on and checks the router through a generation)."""
        store = self.stores(conn, self.host, ROUTER_ROOT)
        notes = [lock.recovered] if lock.recovered else []
        unit = self.book.router.unit  # type: ignore[union-attr]
        notes += [f"removed {'a new `current` link' if CURRENT_TEMP in p else 'a temp file'} a dead run left: {p}"
                  for p in recovery.drop_temp_files(store.session, unit, ROUTER_ROOT)]
        notes += recovery.finish_commits(store)
        found = recovery.find(store)
        notes += recovery.close_interrupted(store, found)
        current = store.current()
        # Not only after a dead deploy (`found`): a rollback killed between putting its target back and moving
        # `current` leaves no release in progress, only a router running other files than `current` names.
        if current is not None and not recovery.runs_files_of(store.session, current):
            copies = restore.verified_copies(store, current)
            if isinstance(copies, str):
                raise FleetError(f"{self.host.name}: after an interrupted router deploy: {copies}")
            problem = restore.put_files(conn, self.host, current, copies)  # by rename where kept: a full disk too
            if problem:
                raise FleetError(f"{self.host.name}: after an interrupted router deploy: {problem}")
            daemon_reload(conn, self.host)
            restore.restart(conn, self.host, unit)
            notes.append(f"router release {current.id} put back and restarted")
        for note in notes:
            say(f"recovering: {note}")
        return notes

    def restore(self, conn: Connection, store: ReleaseStore, release: Release) -> ServerVerdict:
        """A router release's unit and env file back byte for byte, restarted and checked with a generation."""
        unit = self.book.router.unit  # type: ignore[union-attr]
        copies = restore.verified_copies(store, release)
        if isinstance(copies, str):
            return Outcome.PREFLIGHT, copies
        if problem := restore.owner_problem(conn, self.host, store, release):  # before anything stops
            return Outcome.PREFLIGHT, problem
        stop_quietly(conn, self.host, unit)
        problem = restore.put_files(conn, self.host, release, copies)  # by rename where kept: a full disk too
        if problem:
            return Outcome.INSTALL_FAILED, problem
        daemon_reload(conn, self.host)
        restore.restart(conn, self.host, unit)
        return self._ready(conn)

    def drop_kept(self, conn: Connection) -> None:
        """The router run has ended: the copies its writes kept of the router's unit and env are dropped (never
        raised: the next run drops them too)."""
        with suppress(Exception):
            drop_kept(conn, self.host, [unit_path(self.book), env_path(self.book)])


@dataclass
class RouterSteps:
    """The fall-back's steps for the router (fleet.deploy.fallback): its unit stopped, a router release put
    back and checked through a generation, the new release closed as failed, `current` pointed back."""

    hooks: RouterHooks
    conn: Connection
    store: ReleaseStore
    run: ReleaseRun

    @property
    def label(self) -> str:
        return f"{self.hooks.host.name}: router"

    @property
    def new_release(self) -> str:
        return self.run.release.id

    def stop(self) -> None:
        stop_quietly(self.conn, self.hooks.host, self.hooks.book.router.unit)  # type: ignore[union-attr]

    def put_back(self, previous: Release) -> ServerVerdict:
        return self.hooks.restore(self.conn, self.store, previous)

    def close_failed(self) -> None:
        with suppress(Exception):  # the error to report is the attempt's; recovery closes an unclosed release
            self.run.fail()

    def point_back(self, previous: Release) -> str | None:
        return self.store.point_back(previous)


def drain(conn: Connection, host: Host, book: Playbook, say: Progress,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
    """Wait (up to budgets.stop) until the replica runs no request (sglang:num_running_reqs in /metrics), saying where
    it stands as Live (it said a line every 0.5 s) and, past the budget, that the stop goes on (it said nothing)."""
    start, budget, running = clock(), book.budgets.stop, 0.0
    while clock() - start < budget:
        running = running_requests(hostcurl.metrics_text(conn, host, book.serve.port))
        if not running:
            return
        say(standing("drain", clock() - start, budget, note=f"; {running:g} request(s) still running"))
        sleep(0.5)
    say(f"drain: {running:g} request(s) still running after {budget:.0f}s (budgets.stop): stopping all the same")


# ---------------------------------------------------------------------- entry points for the deploy command


def prepare(hosts: list[Host], book: Playbook, path: Path, opts: ConnectOptions, secrets: dict[str, str],
            say: HostSay) -> RouterHooks:
    """Bad input (an unknown router host) fails here, before any host is contacted."""
    return RouterHooks(book, path, router_host(book, path, hosts), opts, secrets, say)


def hooks_for(hosts: Sequence[Host], book: Playbook, path: Path, opts: ConnectOptions, secrets: dict[str, str],
              progress_for: Callable[[Host], Progress]) -> RouterHooks | None:
    """For an operation on replicas (tune, bench, patch, recover): a playbook with a router gives the hooks that
    take its replicas out and put them back (a router that does not answer: none is taken out)."""
    if book.router is None:
        return None
    named = {h.name: h for h in hosts}
    hooks = prepare(list(hosts), book, path, opts, secrets,
                    lambda name, m: progress_for(named.get(name) or hooks.host)(m))
    hooks.start()
    return hooks


def back_in(hooks: RouterHooks, host: Host, status: DeployStatus, wait: float = 0.0,
            sleep: Callable[[float], None] = time.sleep) -> None:
    """The replica back into the router when it serves (whatever the operation's status: a tune that failed may
    have put back the release that served), waiting up to `wait` seconds for its /health (a server an operation
    started again); else left out. A replica this run did not take out is only ever added: a missed /health
    (a busy server) never removes it. Never raised."""
    with suppress(FleetError):
        url = worker_url(host, hooks.book)
        deadline = time.monotonic() + wait
        serves = status in SERVING or hooks.live.serves(url)
        while not serves and time.monotonic() < deadline:
            sleep(1)
            serves = hooks.live.serves(url)
        if serves or hooks.taken_out(host):
            hooks.after(host, DeployResult(host.name, DeployStatus.OK if serves else status))
