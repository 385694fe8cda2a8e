"""Multi-node deploys: one sglang server over N hosts (a playbook's `nodes:`), deployed and rolled back as one.

Each host given is a node, its rank its place in the --host/--group order; `--dist-init-addr` is rank 0's
inventory address and `nodes.dist_port`. Every node gets its own unit (`--nnodes N --node-rank r
--dist-init-addr A:P` appended to the rung's flags) and its own release; the releases share one id, the
deployment's. Per rung, on every node: stop and empty the GPUs, set patch sets, install unit and env; then
start rank 0 first and the others right after (both sides of torch's rendezvous wait up to the dist timeout,
so the order only decides who waits: with rank 0 first its store is there when the others connect), follow
every node's journal together until each is READY (rank 0: "fired up"; the others: their dummy health
server), one node failing stops the watch on all, then health through rank 0. A rung fails or serves on all
nodes together. When every rung failed, every node goes back to its previous release and they are started
together again (a node without one is left stopped). `inv rollback` of such a playbook does the same on
purpose: every node back to one earlier deployment (the same release id on all), started together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from fabric import Connection

from fleet import parallel
from fleet.deploy import fallback, recovery, restore
from fleet.deploy.bench_record import BenchRecord
from fleet.deploy.health import health_check, node_health
from fleet.deploy.hostrun import HostRun, Recover, deploy_recovery, host_run
from fleet.deploy.ladder import Deployer
from fleet.deploy.preflight import port_problem
from fleet.deploy.results import Attempt, DeployResult
from fleet.deploy.serving import prune_venvs
from fleet.errors import ConnectError, FleetError
from fleet.host import venvs
from fleet.host.facts import stack_versions
from fleet.host.releases import Release, ReleaseStore, new_id, now, versions_of
from fleet.host.session import HostSession
from fleet.inventory import Host
from fleet.logs import journal
from fleet.multihost.multinode_node import Node
from fleet.multihost.multinode_plan import check_hosts, dist_init_addr, node_args
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus
from fleet.playbook import Playbook, Rung, sglang_version
from fleet.progress import Progress, prefixed, ticking
from fleet.ssh.connect import ConnectOptions


class MultiNode:
    def __init__(self, hosts: Sequence[Host], book: Playbook, book_path: Path, opts: ConnectOptions,
                 progress_for: Callable[[Host], Progress], secrets: dict[str, str] | None = None, *,
                 sessions: Callable[[Host, ConnectOptions], HostSession] = HostSession.open,
                 stores: Callable[[Connection, Host], ReleaseStore] = ReleaseStore,
                 recover: Callable[[Playbook, str, Progress], Recover] = deploy_recovery):
        """`sessions`, `stores`, `recover`: how a node's session opens, its release store is read and what a dead
        run left on it is recovered (tests: fakes)."""
        check_hosts(book, hosts)
        self.book, self.opts = book, opts
        self.sessions, self.stores, self.recover = sessions, stores, recover
        self.addr = dist_init_addr(book, hosts)
        self.nodes: list[Node] = []
        for rank, host in enumerate(hosts):
            say = progress_for(host)
            args = tuple(node_args(book, hosts, rank))
            deployer = Deployer(host, book, book_path, opts, say, secrets, extra_args=args)
            self.nodes.append(Node(rank, host, deployer, say, DeployResult(host.name)))
        self.book_sha = self.nodes[0].deployer.serve.book_sha

    # ------------------------------------------------------------------ the run
    def run(self, dry_run: bool = False, force: bool = False) -> list[DeployResult]:
        if dry_run:  # each node's unit and env diff, as a single-node dry run shows it
            return [n.deployer.run(dry_run=True) for n in self.nodes]
        with self._locked("deploy"):
            self._deploy(force)
        return [n.result for n in self.nodes]

    def rollback(self, to: str | None) -> list[DeployResult]:
        """Every node back to one earlier known-good deployment (default: the one before the current)."""
        with self._locked("rollback"):
            self._rollback(to)
        return [n.result for n in self.nodes]

    @contextmanager
    def _locked(self, action: str) -> Iterator[None]:
        """Every node connected, then each in a run of its own (fleet.deploy.hostrun: locked, what a dead run left
        recovered); the runs end, unlocked and closed, after. A node whose lock cannot be released (lost
        mid-deploy: the next run recovers it) fails alone; the others' results still count."""
        runs: list[tuple[Node, HostRun]] = []
        with ExitStack() as stack:
            for n in self.nodes:
                session = self.sessions(n.host, self.opts)
                stack.callback(session.close)
                n.connected(session)
            for n in self.nodes:
                purpose = f"{action} {self.book.name} (node {n.rank} of {len(self.nodes)})"
                n.runs_under(stack.enter_context(host_run(
                    n.host, self.opts, purpose, unit=n.deployer.serve.unit, session=n.session, progress=n.say,
                    recover=self.recover(self.book, n.deployer.serve.unit, n.say), strict_end=False)))
                runs.append((n, n.host_run))
            yield
        for n, run in runs:
            if run.end_problem:
                n.end_failed(run.end_problem)

    def _rollback(self, to: str | None) -> None:
        for n in self.nodes:
            n.reads(self.stores(n.conn, n.host))
        try:
            target = self._rollback_target(to)
        except FleetError as exc:  # refused before anything changed: said for every node
            for n in self.nodes:
                n.said(str(exc))
            return
        running = {n.rank: n.store.current() for n in self.nodes}  # what to go back to if the target fails
        for n in self.nodes:
            n.serves(n.result.status, target, n.result.config)
            n.goes_back_to(n.store.load(target))
            n.say(f"rolling back to {target} ({n.prior.rung})")
        if refused := self._owner_refused(self.nodes):  # as a host's rollback: before anything stops
            for n in self.nodes:
                n.said(f"{n.host.name}: rollback to {target} refused: {refused}; nothing was changed")
            return
        start = time.monotonic()
        outcome, evidence = self._put_back_and_start(self.nodes, "rollback")
        for n in self.nodes:
            n.serves(n.result.status, n.result.release, n.prior.config)
            n.tried(Attempt(n.prior.rung or "-", outcome, evidence, time.monotonic() - start))
        why = f"did not come up: {outcome} {evidence}"
        if outcome == Outcome.READY:
            moved = self._move_current(running)
            if moved is None:
                for n in self.nodes:
                    n.serves(DeployStatus.OK, n.result.release, n.result.config)
                return
            why = f"served, but {moved}"
        note = self._back_to(running)
        for n in self.nodes:
            n.said(f"{n.host.name}: rollback to {target} {why}; {note}")
            if note.startswith("back on"):
                n.serves(n.result.status, n.prior.id, n.prior.config)

    def _move_current(self, running: dict[int, Release | None]) -> str | None:
        """Every node's `current` to its `previous` (the target, serving); None when all moved. When one move
        fails, the nodes that moved and the one that failed (its answer lost, it may have moved) are pointed back
        at what they ran (`running`), so that every node names one release, and what went wrong is returned: the
        caller then puts that release back on every node."""
        moved: list[Node] = []
        for n in self.nodes:
            moved.append(n)  # the failing node too: a move whose answer was lost may have happened
            try:
                n.store.mark_current(n.prior)
            except Exception as exc:  # noqa: BLE001 - a full disk, a failed mv, a node lost (a plain OSError)
                problem = f"making it current on {n.host.name} failed: {str(exc).strip()[:200] or type(exc).__name__}"
                break
        else:
            return None
        for n in moved:
            back = running[n.rank]
            try:
                n.store.mark_current(back) if back is not None else n.store.clear_current()
            except Exception as exc:  # noqa: BLE001 - said; the next rollback or deploy on the node sees it
                problem += f"; {n.host.name}'s current could not be pointed back: {str(exc).strip()[:200]}"
        return problem

    def _back_to(self, running: dict[int, Release | None]) -> str:
        """After a failed rollback: every node on the release it ran before, started together again."""
        if any(r is None for r in running.values()):
            return "no node may go back (one had no current release): they are stopped"
        for n in self.nodes:
            n.goes_back_to(running[n.rank])
            n.say(f"going back to {n.prior.id}")
        outcome, evidence = self._put_back_and_start(self.nodes, "restore")
        if outcome == Outcome.READY:
            return f"back on {self.nodes[0].prior.id}"
        return f"going back to {self.nodes[0].prior.id} failed too: {outcome} {evidence}"

    def _put_back_and_start(self, nodes: list[Node], label: str) -> tuple[str, str]:
        """Every node stopped, then each node's files as its `previous` release has them, then all started; none
        stopped where a node's release must not start (restore.owner_problem)."""
        try:
            if refused := self._owner_refused(nodes):
                return Outcome.PREFLIGHT, refused
            for n in reversed(nodes):  # a node stopped makes its peers fail: stop them all first
                _stop(n, self.book.budgets.stop)
            for n in nodes:
                failed = restore.put_back(n.conn, n.host, n.store, n.prior, self.book, n.say)
                if failed:
                    return failed.outcome, f"{n.host.name} (node {n.rank}): {failed.evidence}"
                self._aim_at_previous(n)
            return self._start_together(nodes, label)
        except Exception as exc:  # noqa: BLE001 - a node lost (fabric's reconnect raises plain OSError)
            return Outcome.EXITED, f"a node was lost: {exc or type(exc).__name__}"

    def _owner_refused(self, nodes: list[Node]) -> str | None:
        """Why a node's release to put back must not start (its venv's owner now: restore.owner_problem), asked of
        every node before any stops; None where each may."""
        for n in nodes:
            try:
                problem = restore.owner_problem(n.conn, n.host, n.store, n.prior)
            except (ConnectError, OSError):  # a node that cannot be asked (lost) fails its own put-back, said there
                continue
            except Exception as exc:  # noqa: BLE001 - asked and not answered (a drop-in it cannot read): not judged
                problem = f"the owner rule cannot judge its release ({exc}), so it is not started"
            if problem:
                return f"{n.host.name} (node {n.rank}): {problem}"
        return None

    def _rollback_target(self, to: str | None) -> str:
        """The deployment every node has as a release that served: `to`, or the latest before the current."""
        good: dict[str, set[str]] = {}
        current: dict[str, str | None] = {}
        for n in self.nodes:
            releases = n.store.list()
            good[n.host.name] = {r.id for r in releases if r.status == ReleaseStatus.OK}
            current[n.host.name] = n.store.current_id()
        names = [n.host.name for n in self.nodes]
        if to:
            missing = [name for name, ids in good.items() if to not in ids]
            if missing:
                raise FleetError(f"{', '.join(missing)}: no release {to} that served; every node of "
                                 f"{self.book.name} must have it (see `inv history`)")
            target = to
        else:
            newest = max((c for c in current.values() if c), default=None)
            earlier = sorted(i for i in set.intersection(*good.values()) if newest is None or i < newest)
            if not earlier:
                raise FleetError(f"{self.book.name}: no earlier release that served on every node ({', '.join(names)})")
            target = earlier[-1]
        head = self.nodes[0].store.load(target)
        nodes = head.config.get("nodes") if head else None
        spans = nodes.get("hosts") if isinstance(nodes, dict) else None
        if spans and spans != names:
            raise FleetError(f"release {target} was deployed over {', '.join(spans)} (rank 0 first), not "
                             f"{', '.join(names)}: give those hosts in that order")
        return target

    @staticmethod
    def _aim_at_previous(n: Node) -> None:
        nodes = n.prior.config.get("nodes")
        n.starts(restore.unit_of(n.prior), (nodes.get("rank", 0) if isinstance(nodes, dict) else 0) == 0)

    def _deploy(self, force: bool) -> None:
        for n in self.nodes:
            n.say("probing")
            n.probed(n.session.probe(n.say))
            n.reads(self.stores(n.conn, n.host))
            n.goes_back_to(n.store.current())
        if not force and self._unchanged():
            for n in self.nodes:
                n.serves(DeployStatus.UNCHANGED, n.prior.id, n.prior.config)
                n.say(f"deployment {n.prior.id} already serves this playbook and is healthy: nothing to do")
            return
        if self._stopping() or (self.book.packages and not self._pinned()):
            return
        rid = new_id()
        rungs = self._preflight()
        if not rungs:
            for n in self.nodes:
                n.said(f"{n.host.name}: no rung of {self.book.name} can run on all {len(self.nodes)} nodes; "
                       "nothing was changed")
            return
        if self._stopping():
            return
        for n in self.nodes:
            release = Release(id=rid, host=n.host.name, playbook=self.book.name, playbook_sha256=self.book_sha,
                              created=now(), facts={"gpus": len(n.facts.gpus),
                                                    "sm": sorted({g.sm for g in n.facts.gpus if g.sm}),
                                                    "node_rank": n.rank,
                                                    "versions": stack_versions(n.facts)})
            if self.book.packages:  # every node runs the same pin set, each from its own copy of the venv
                release.runs_in(n.deployer.serve.venv)
            n.opened(release, n.host_run.open_release(n.store, release, rungs=[r.name for r in rungs],
                                                      deployment=rid, nodes=[m.host.name for m in self.nodes],
                                                      rank=n.rank))
        last_class: str | None = None
        for rung in rungs:
            if not rung.worth_trying_after(last_class):
                self.nodes[0].say(f"rung {rung.name}: not worth trying after {last_class}")
                continue
            start = time.monotonic()
            try:
                outcome, evidence, record = self._attempt(rung, rid)
                for n in self.nodes:  # in the results first: a node lost while writing its record is still told
                    n.tried(Attempt(rung.name, outcome, evidence, time.monotonic() - start,
                                    record if n.rank == 0 else None))
                for n in self.nodes:
                    n.run.event("attempt", rung=rung.name, outcome=outcome, evidence=evidence)
                    n.run.record(n.result.attempts[-1])
                if outcome == Outcome.READY:
                    for n in self.nodes:
                        n.run.succeed(rung.name, n.planned.config, self.book.keep_releases)
                        n.serves(DeployStatus.OK, n.result.release, n.planned.config)
                    if self.book.packages:
                        for n in self.nodes:
                            prune_venvs(n.conn, n.deployer.host, n.say)
                    return
            except Exception as exc:  # noqa: BLE001 - a node lost (fabric's reconnect raises plain OSError)
                self._fall_back(f"rung {rung.name} broke off ({exc or type(exc).__name__})")
                return
            last_class = outcome
        self._fall_back("every rung failed")

    def _stopping(self) -> bool:
        """Ctrl-C before any node changed: every node stops here, as one host's deploy does (Deployer.stopped)."""
        if not parallel.stopping():
            return False
        for n in self.nodes:
            n.say("Ctrl-C: stopped before any change")
            before = n.previous
            n.serves(DeployStatus.SKIPPED, before.id if before else None, before.config if before else {})
            n.said(f"{n.host.name}: stopped by Ctrl-C before any change; it runs what it ran before")
        return True

    def _pinned(self) -> bool:
        """`packages:`: every node gets the pins' venv (built where it has none) before any node is stopped, then
        is probed in it; False, with every node's error set, when one node cannot (nothing stopped anywhere)."""
        for n in self.nodes:
            n.was_on(versions_of(n.previous.facts) if n.previous else {})
            try:
                venv = n.deployer.use_pins(n.conn)
            except venvs.VenvError as exc:
                for m in self.nodes:
                    m.said(f"{exc}; nothing was stopped on any node")
                return False
            n.in_venv(venv.record(), n.session.as_host(n.deployer.host).probe())
        return True

    def _unchanged(self) -> bool:
        prev = [n.previous for n in self.nodes]
        first = prev[0]
        if first is None or any(p is None or p.playbook_sha256 != self.book_sha or p.id != first.id for p in prev):
            return False
        if not all(n.deployer.serve.key_unchanged(n.conn) for n in self.nodes):
            return False
        # a rollback that died after starting its target runs that release's files under the current one's name
        if not all(recovery.runs_files_of(n.session, n.prior) for n in self.nodes):
            return False
        if any(n.session.unit_state(n.deployer.serve.unit).get("ActiveState") != "active" for n in self.nodes):
            return False
        return health_check(self.nodes[0].conn, self.nodes[0].host, self.book)[0] == Outcome.READY

    def _preflight(self) -> list[Rung]:
        """Rungs every node can run (each node's own preflight), and rank 0's dist port free."""
        kept = {r.name for r in self.book.ladder}
        for n in self.nodes:
            rungs = n.deployer.eligible(n.facts)
            rungs, skipped = n.deployer.preflight(n.conn, n.facts, rungs)
            n.tried(*skipped)
            kept &= {r.name for r in rungs}
        head = self.nodes[0]
        assert self.book.nodes is not None  # check_hosts made sure
        busy = port_problem(head.conn, head.host, self.book.nodes.dist_port, head.deployer.serve.unit)
        if busy:
            for n in self.nodes:
                n.tried(Attempt("-", Outcome.PREFLIGHT, f"{head.host.name} (rank 0): dist {busy}", 0))
            return []
        return [r for r in self.book.ladder if r.name in kept]

    # ------------------------------------------------------------------ one rung on every node
    def _attempt(self, rung: Rung, rid: str) -> tuple[str, str, BenchRecord | None]:
        for n in self.nodes:
            n.plans(n.deployer.serve.plan(rung, rid, sglang_version(n.facts)))
            n.planned.config["nodes"] = {"count": len(self.nodes), "rank": n.rank, "dist_init_addr": self.addr,
                                         "hosts": [m.host.name for m in self.nodes], "deployment": rid}
        for n in self.nodes:
            why = restore.unit_problem(n.conn, n.host, n.planned, n.deployer.serve.unit_path)
            if why:  # nothing stopped on any node yet
                return Outcome.INSTALL_FAILED, f"{n.host.name} (node {n.rank}): {why}", None
        for n in reversed(self.nodes):  # a node stopped makes its peers fail: stop them all before anything else
            n.run.event("stop", rung=rung.name)
            _stop(n, self.book.budgets.stop, f"[{rung.name}] ")
        for n in self.nodes:
            where = n.deployer.host  # the pins' venv where the playbook has packages: its patch sets go there
            problem = restore.set_patches(n.conn, where, rung.patches, n.say)
            if problem:
                return Outcome.PREFLIGHT, f"{n.host.name} (node {n.rank}): {problem}", None
            n.release.patched(list(rung.patches), restore.patched_files(n.conn, where))
            serve = n.deployer.serve
            restore.install(n.conn, n.host, n.store, n.release, n.planned, serve.unit_path, serve.env_path)
            n.run.event("installed", rung=rung.name, files=n.release.files)
            n.starts(n.deployer.serve.unit, n.rank == 0)
        outcome, evidence = self._start_together(self.nodes, rung.name)
        record = None
        head = self.nodes[0]
        measure = head.deployer.runner.measure if head.deployer.runner.measure is not None else \
            bool(self.book.bench and self.book.bench.gate)
        if outcome == Outcome.READY and measure:
            outcome, evidence, record = head.deployer.runner.gate.check(head.conn, rung, evidence, head.say)
        head.say(f"[{rung.name}] {outcome}: {evidence}")
        return outcome, evidence, record

    def _start_together(self, nodes: list[Node], label: str) -> tuple[str, str]:
        """Start every node's unit (the API node first), follow all journals together, then check health."""
        cursors = {n.rank: journal.cursor(n.conn, n.host) for n in nodes}
        for n in sorted(nodes, key=lambda m: not m.serves_api):
            restore.restart(n.conn, n.host, n.unit)
            n.say(f"[{label}] started node {n.rank}; following the journal")
        stop = threading.Event()
        outcomes: dict[int, tuple[str, str]] = {}

        def follow(n: Node) -> None:
            try:
                outcomes[n.rank] = journal.watch(n.conn, n.host, n.unit, cursors[n.rank], self.book.budgets,
                                                 lambda m: n.say(f"[{label}] {m}"), stop, n.sglang)
            except Exception as exc:  # noqa: BLE001 - one node's surprise is the deployment's failure
                outcomes[n.rank] = (Outcome.EXITED, f"watching the journal failed: {type(exc).__name__}: {exc}")
            if outcomes[n.rank][0] != Outcome.READY:
                stop.set()

        threads = [threading.Thread(target=follow, args=(n,), daemon=True) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        failed = [(n, outcomes[n.rank]) for n in nodes if outcomes[n.rank][0] not in (Outcome.READY, Outcome.STOPPED)]
        if failed:
            n, (outcome, evidence) = failed[0]
            return outcome, f"{n.host.name} (node {n.rank}): {evidence}"
        for n in nodes:
            if n.serves_api:
                outcome, evidence = health_check(n.conn, n.host, self.book)
            else:
                outcome, evidence = node_health(n.conn, n.host, self.book.serve.port)
            if outcome != Outcome.READY:
                return outcome, f"{n.host.name} (node {n.rank}): {evidence}"
        return Outcome.READY, f"all {len(nodes)} nodes up; {evidence if len(nodes) == 1 else 'healthy through rank 0'}"

    # ------------------------------------------------------------------ every rung failed
    def _fall_back(self, why: str) -> None:
        """Every node back on its previous release, started together again, then the releases closed as failed
        (as fleet.deploy.fallback: until then a run cut here leaves them in progress to the next run's recovery)."""
        problems: dict[int, str] = {}  # a node that cannot be reached must not keep the others from rolling back
        if refused := self._owner_refused([n for n in self.nodes if n.previous is not None]):
            problems = {n.rank: f"{Outcome.PREFLIGHT} {refused}; nothing was stopped" for n in self.nodes}
        for n in reversed(self.nodes if not refused else []):
            try:
                _stop(n, self.book.budgets.stop)
            except Exception as exc:  # noqa: BLE001 - a lost node is left as it is, the others go on
                problems[n.rank] = f"{n.host.name}: {exc or type(exc).__name__}"
        back = [n for n in self.nodes if n.previous is not None and n.rank not in problems]
        for n in back:
            n.say(f"{why}: rolling back to {n.prior.id}")
            try:
                failed = restore.put_back(n.conn, n.host, n.store, n.prior, self.book, n.say)
                if failed:
                    problems[n.rank] = f"{failed.outcome} {failed.evidence}"
                elif n.store.current_id() != n.prior.id:  # the new release was made current on some nodes only
                    n.store.mark_current(n.prior)
            except Exception as exc:  # noqa: BLE001 - as above
                problems[n.rank] = f"{n.host.name}: {exc or type(exc).__name__}"
                continue
            self._aim_at_previous(n)
        restarted = [n for n in back if n.rank not in problems]
        lost = [n.host.name for n in self.nodes if n.rank not in {m.rank for m in restarted}]
        outcome: str
        if restarted and lost:  # the rest alone would wait for a lost rank, holding their GPUs: left stopped
            outcome, evidence = Outcome.STOPPED, (f"{', '.join(lost)} could not go back, so the other nodes are left "
                                                  "stopped on their previous release's files (one server needs "
                                                  "every node): start them together once it is back")
            for n in restarted:
                n.say(evidence)
        else:
            try:
                outcome, evidence = self._start_together(restarted, "rollback") if restarted else (Outcome.READY, "")
            except Exception as exc:  # noqa: BLE001 - as above
                outcome, evidence = Outcome.EXITED, str(exc) or type(exc).__name__
        for n in reversed(self.nodes):
            try:  # a release that cannot be closed (a full disk) stays in progress for the next run's recovery
                n.run.fail()
            except Exception as exc:  # noqa: BLE001
                n.say(f"closing release {n.release.id} as failed did not work ({exc or type(exc).__name__}); the next "
                      "run's recovery closes it")
        for n in self.nodes:  # in the words of the one fall-back (fleet.deploy.fallback), node by node
            name = n.host.name
            if n.previous is None:
                fell = fallback.nothing_before(name, n.release.id, why, problems.get(n.rank))
            elif n.rank in problems or outcome != Outcome.READY:
                fell = fallback.failed_too(name, n.prior, why, problems.get(n.rank) or f"{outcome} {evidence}")
            else:
                fell = fallback.back_on(name, n.prior, why)
            n.ended_on(fell)


def _stop(n: Node, budget: float, label: str = "") -> None:
    """A node's server stopped and its GPUs emptied, said with its budget and, while it goes on, where it stands (a
    multi-node deploy's stops, its fall-back's and its rollback's were silent, up to the budget each node)."""
    n.say(f"{label}stopping {n.deployer.serve.unit} and emptying the GPUs (budget {budget:.0f}s)")
    with ticking(lambda m: n.say(prefixed(label, m)), "stop", budget):
        n.session.stop_and_empty_gpus(n.deployer.serve.unit, budget, n.say)
