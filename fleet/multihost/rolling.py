"""Deploys of many hosts: each host on its own (parallel, bounded), or a rolling deploy in batches.

A rolling deploy runs batch after batch, each in parallel on a bounded pool; a batch ends before the next
starts, and the rollout stops once more hosts failed than --max-fail allows (the rest are `skipped`). A
host that served teaches its hardware fingerprint its winning rung (fleet.deploy.fingerprint). With RouterHooks
(fleet.multihost.router) each host is a replica behind sglang's router.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from fleet import parallel
from fleet.deploy import fingerprint
from fleet.deploy.ladder import Deployer
from fleet.deploy.results import DeployResult
from fleet.errors import FleetError
from fleet.host.releases import now
from fleet.inventory import Host
from fleet.multihost import rollout
from fleet.multihost.canary import CanaryResult
from fleet.multihost.router import RouterHooks
from fleet.multihost.router_report import RouterReport, RouterRun
from fleet.outcomes import SERVING, DeployStatus
from fleet.playbook import Playbook
from fleet.progress import Progress
from fleet.ssh.connect import ConnectOptions


class Board(Protocol):
    """Who watches a rollout: told of each host's state and the batch under way."""

    def update(self, host: str, state: str | None = None, note: str | None = None) -> None: ...

    def says(self, headline: str) -> None:
        """The line over the hosts: the batch under way, or what an interrupt waits for."""


def collect(outcomes: Sequence[parallel.HostOutcome[DeployResult]]) -> list[DeployResult]:
    """An outcome that raised is a failed result with its error."""
    return [o.value if o.ok and o.value else
            DeployResult(o.host.name, DeployStatus.FAILED, error=o.error, unreached=o.unreached) for o in outcomes]


class DeployInterrupted(KeyboardInterrupt):
    """Ctrl-C during `each`: every host's result as it stood (not started, ended, or left mid-deploy)."""

    def __init__(self, results: list[DeployResult]) -> None:
        super().__init__()
        self.results = results


def interrupted_results(hosts: Sequence[Host], outcomes: list[parallel.HostOutcome[DeployResult] | None],
                        started: set[str], doing: str = "deploying") -> list[DeployResult]:
    """Where each host is after a Ctrl-C (pure): its result where its deploy (or rollback: `doing`) ended, else not
    started (it runs what it ran before) or left mid-deploy (a second Ctrl-C: its next run recovers it)."""
    out = []
    for h, o in zip(hosts, outcomes, strict=True):
        if o is not None:
            out += collect([o])
        elif h.name in started:
            out.append(DeployResult(h.name, DeployStatus.FAILED, error=f"{h.name}: interrupted while {doing}; the "
                                    "next deploy or rollback there takes over its lock and recovers what it left"))
        else:
            out.append(DeployResult(h.name, DeployStatus.SKIPPED, error=f"{h.name}: not started: interrupted; it "
                                    "runs what it ran before"))
    return out


def each(hosts: Sequence[Host], book: Playbook, path: Path, opts: ConnectOptions, secrets: dict[str, str],
         say_for: Callable[[Host], Progress], dry_run: bool = False, force: bool = False,
         notice: Callable[[str], None] | None = None, deployer_of: type[Deployer] = Deployer) -> list[DeployResult]:
    """Every host deployed on its own, in parallel (a dry run, or one host). What a deploy showed is learned as a
    rolling deploy's host teaches it (learn); a dry run changes and learns nothing. Ctrl-C: `notice` says at once
    what happens (no host starts, those under way end), then DeployInterrupted with every host's result.
    `deployer_of`: what deploys one host (Deployer)."""
    def one(host: Host) -> DeployResult:
        say = say_for(host)
        deployer = deployer_of(host, book, path, opts, say, secrets)
        result = deployer.run(dry_run=dry_run, force=force)
        if not dry_run:
            learn(book, deployer, host, result, say)
        return result

    return each_host(hosts, one, notice)


def each_host(hosts: Sequence[Host], one: Callable[[Host], DeployResult], notice: Callable[[str], None] | None = None,
              doing: str = "deploying", ends: str = parallel.DEPLOY_ENDS) -> list[DeployResult]:
    """`one` on every host, in parallel (a deploy, a rollback: `doing`, and how one under way `ends` its work).
    Ctrl-C: `notice` says at once what happens (no host starts, those under way end), then DeployInterrupted with
    every host's result."""
    started: set[str] = set()

    def run(host: Host) -> DeployResult:
        started.add(host.name)
        return one(host)

    try:
        return collect(parallel.run_all(hosts, run, notice=notice, ends=ends,
                                             left=parallel.DEPLOY_LEFT))
    except parallel.Interrupted as stop:
        raise DeployInterrupted(interrupted_results(hosts, stop.outcomes, started, doing)) from None


def learn(book: Playbook, deployer: Deployer, host: Host, result: DeployResult, say: Progress) -> None:
    """What a deploy's host showed (one host alone or in a rollout), added to its fingerprint's evidence: the rung
    that served (when one did) and the failures before it, a host that rolled back included; never a reason to
    fail the deploy. Only the evidence's rules decide what a failure means (fleet.deploy.evidence)."""
    served = result.rung if result.status == DeployStatus.OK else None
    if deployer.facts is None or not (served or result.attempts):
        return
    try:
        k = fingerprint.learn(book, deployer.facts, book.rung(served) if served else None, host.name,
                              result.release or "", result.attempts)
    except (OSError, KeyError, ValueError) as exc:
        say(f"could not remember what this deploy showed: {exc}")
        return
    say(f"remembered rung {served} as known-good for fingerprint {k}" if served
        else f"remembered this deploy's failures for fingerprint {k}")


@dataclass(frozen=True)
class BatchRecord:
    """One batch of a rolling deploy as `--json`'s `batches` lists it: its hosts and how it ended, which failed,
    whether it was the canary, the upgrades that served only by falling back, when it ran. A batch the rollout
    stopped before is skipped and says nothing more (started None)."""

    batch: int
    hosts: tuple[str, ...]
    status: DeployStatus
    failed: tuple[str, ...] = ()
    canary: bool = False
    fell_back: tuple[str, ...] = ()
    started: str | None = None
    finished: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"batch": self.batch, "hosts": list(self.hosts), "status": self.status}
        if self.started is None:
            return out
        out.update(failed=list(self.failed), canary=self.canary)
        if self.fell_back:
            out["fell_back"] = list(self.fell_back)
        out.update(started=self.started, finished=self.finished, seconds=self.seconds)
        return out


@dataclass(frozen=True)
class RolloutPlan:
    """A rolling deploy's batches, planned before anything runs."""

    hosts: list[Host]
    groups: list[list[Host]]  # the batches, in order
    batch_of: dict[str, int] = field(default_factory=dict)
    canary: bool = False  # --serial gave batch 1 a size of its own: a canary (fleet.multihost.rollout.is_canary)


@dataclass(frozen=True)
class Rollout:
    """A rolling deploy as it ran (its plan apart): each host's result, each batch's record, why it stopped, the
    hosts still deploying after --host-timeout, the router's report."""

    plan: RolloutPlan
    results: list[DeployResult]  # in the order of the plan's hosts
    seconds: dict[str, float] = field(default_factory=dict)
    batches: list[BatchRecord] = field(default_factory=list)
    stopped: str | None = None
    interrupted: bool = False  # the operator pressed Ctrl-C
    background: list[str] = field(default_factory=list)  # still deploying after --host-timeout
    pending: dict[str, Future[DeployResult]] = field(default_factory=dict, repr=False)  # their deploys
    router: RouterReport | None = None
    judged: CanaryResult | None = None  # --canary: how batch 1's window ended

    @property
    def hosts(self) -> list[Host]:
        return self.plan.hosts

    @property
    def batch_of(self) -> dict[str, int]:
        return self.plan.batch_of

    @property
    def canary(self) -> bool:
        return self.plan.canary

    @property
    def ok(self) -> bool:
        router_ok = self.router is None or self.router.serves
        return router_ok and not self.background and all(r.status in SERVING for r in self.results)


def plan_batches(hosts: list[Host], sizes: list[rollout.Amount] | None) -> RolloutPlan:
    """The batches --serial makes of the hosts (bad input was refused by rollout.parse_serial)."""
    groups = rollout.batches(hosts, sizes)
    return RolloutPlan(hosts, groups, batch_of={h.name: i for i, group in enumerate(groups, 1) for h in group},
                   canary=rollout.is_canary(sizes, len(groups)))


Job = Callable[[Host, Progress, "RouterHooks | None"], DeployResult]  # one host's work in a batch, not a deploy
JudgeCanary = Callable[[list[Host], list[Host]], CanaryResult]  # (canary hosts, baseline hosts): the window


def not_judged(result: DeployResult) -> DeployResult:
    """A canary a Ctrl-C kept from its judge's verdict: it serves the new release, said as none passed."""
    return replace(result, notes=[*result.notes, f"the canary was not judged (Ctrl-C during its window): it serves "
                                  f"release {result.release}, which no judge passed; `inv rollback --host "
                                  f"{result.host}` puts back the release before"])


def roll_out(plan: RolloutPlan, book: Playbook | None, path: Path | None, opts: ConnectOptions, secrets: dict[str, str],
             force: bool, limit: rollout.Amount, timeout: float | None, say_for: Callable[[Host], Progress],
             board: Board, hooks: RouterHooks | None = None, notice: Callable[[str], None] | None = None,
             job: Job | None = None, deployer_of: type[Deployer] = Deployer, judge_canary: JudgeCanary | None = None,
             put_back_canary: Job | None = None) -> Rollout:
    """The batches of `plan` one after the other; what they did, made once they end. `job`: each
    host's work when it is not a deploy (a rollback: it takes its replica out through the hooks it is given).
    `deployer_of`: what deploys one host (Deployer; a router playbook's hooks make their own). `judge_canary`
    (--canary): a canary batch that served is judged against the later batches' hosts, still on the old
    release; one it does not pass is put back (`put_back_canary`, a rollback) and the rollout stops."""
    hosts, groups = plan.hosts, plan.groups
    results: dict[str, DeployResult] = {}
    began: dict[str, float] = {}
    failed = 0
    # what the report holds, as the batches go
    seconds: dict[str, float] = {}
    batches: list[BatchRecord] = []
    stopped: str | None = None
    was_interrupted = False
    background: list[str] = []
    pending_deploys: dict[str, Future[DeployResult]] = {}
    judged_window: CanaryResult | None = None

    def one(host: Host) -> DeployResult:
        began[host.name] = time.monotonic()
        board.update(host.name, "deploying", "connecting")
        said = say_for(host)

        def say(message: str) -> None:
            board.update(host.name, note=message)
            said(message)

        if job is not None:
            try:
                return job(host, say, hooks)
            except FleetError as exc:
                return DeployResult.failed_by(host.name, exc)
            except Exception as exc:  # one host's surprise must not hide the others
                return DeployResult(host.name, DeployStatus.FAILED,
                                    error=f"{host.name}: {type(exc).__name__}: {exc}")
        assert book is not None and path is not None, "a deploy's rollout has its playbook (a job may go without)"
        deployer = hooks.deployer(host, book, path, opts, say, secrets) if hooks else \
            deployer_of(host, book, path, opts, say, secrets)
        try:
            result = deployer.run(force=force)
        except FleetError as exc:
            return DeployResult.failed_by(host.name, exc)
        except Exception as exc:  # one host's surprise must not hide the others
            return DeployResult(host.name, DeployStatus.FAILED, error=f"{host.name}: {type(exc).__name__}: {exc}")
        learn(book, deployer, host, result, say)
        return result

    def finish(host: Host, result: DeployResult) -> None:
        if hooks:  # back into the router once healthy, before the next batch starts
            result = hooks.after(host, result)
        results[host.name] = result
        seconds[host.name] = time.monotonic() - began.get(host.name, time.monotonic())
        note = result.error or (f"rung {result.config.get('rung')}, release {result.release}"
                                if result.config.get("rung") else "")
        board.update(host.name, result.status, note)

    def interrupted(futures: dict[Future[DeployResult], Host], said: bool = False) -> None:
        """Ctrl-C: queued hosts are cancelled, in-flight ones end on their own budgets (falling back where
        they fail) unless a second Ctrl-C gives up on them; no later batch starts."""
        nonlocal was_interrupted, stopped
        parallel.stop_starting()  # a host still probing or planning stops before its first change, as under run_all
        was_interrupted = True
        stopped = "interrupted by the operator (Ctrl-C)"
        running = []
        for f, h in futures.items():
            if h.name in results:
                continue
            if f.cancel():
                results[h.name] = DeployResult(h.name, DeployStatus.SKIPPED, error=f"{h.name}: not started: "
                                               "interrupted; it runs what it ran before")
                board.update(h.name, DeployStatus.SKIPPED, "not started (interrupted)")
            else:
                running.append(f)
        if notice and not (said and not running):  # at once (the canary's window said it: not again, "nothing")
            busy = ", ".join(futures[f].name for f in running)
            notice("Ctrl-C: no host or batch starts now; " + (f"waiting for {busy} to end the deploy under way ("
                   f"{parallel.DEPLOY_ENDS}); Ctrl-C again to stop waiting" if running else "nothing was under way"))
        try:
            while running:
                board.says(f"interrupted: waiting for {', '.join(futures[f].name for f in running)} to end "
                           "(Ctrl-C again to stop waiting)")
                done, left = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                running = list(left)
                for f in done:
                    finish(futures[f], f.result())
        except KeyboardInterrupt:
            if notice:
                notice(f"Ctrl-C again: stopped waiting for {', '.join(futures[f].name for f in running)}; the next "
                       "deploy or rollback there takes over its lock and recovers what it left")
            for f in running:
                h = futures[f]
                results[h.name] = DeployResult(h.name, DeployStatus.FAILED, error=f"{h.name}: interrupted while "
                                               "deploying; the next deploy or rollback there takes over its lock "
                                               "and recovers what it left")
                board.update(h.name, DeployStatus.FAILED, "interrupted mid-deploy")

    # daemon threads: a host abandoned after --host-timeout never keeps `inv` from exiting (see settle)
    parallel.no_stop_yet()
    pool = parallel.Pool(min(parallel.MAX_WORKERS, max(len(g) for g in groups)), name="fleet-deploy")
    futures: dict[Future[DeployResult], Host] = {}
    try:
        if hooks:
            hooks.start()
        for i, group in enumerate(groups, 1):
            names = [h.name for h in group]
            if stopped:
                for h in group:
                    results[h.name] = DeployResult(h.name, DeployStatus.SKIPPED,
                                                   error=f"{h.name}: not started: {stopped}")
                    board.update(h.name, DeployStatus.SKIPPED, "not started")
                batches.append(BatchRecord(i, tuple(names), DeployStatus.SKIPPED))
                continue
            board.says(f"{'canary, ' if plan.canary and i == 1 else ''}batch {i} of {len(groups)}: "
                       f"{', '.join(names)}")
            start, started = time.monotonic(), now("milliseconds")
            futures = {}
            for h in group:  # recorded before it is queued: a Ctrl-C here still finds every host that may run
                f: Future[DeployResult] = Future()
                futures[f] = h
                pool.submit(one, h, future=f)
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    finish(futures[f], f.result())
                if timeout is None:
                    continue
                for f in list(pending):
                    h = futures[f]
                    if h.name in began and time.monotonic() - began[h.name] > timeout:
                        pending.discard(f)
                        background.append(h.name)
                        pending_deploys[h.name] = f
                        pool.abandon()  # the next batch never waits for this host's thread
                        finish(h, DeployResult(
                            h.name, DeployStatus.FAILED, error=f"{h.name}: timed out after {timeout:g}s "
                            "(--host-timeout); its deploy may go on to its own end until fleet exits"
                            + (f"; {put_back(h, path, hooks)}" if hooks and path else "")))
            bad = [n for n in names if results[n].status not in SERVING]
            fell = canary_misses([results[n] for n in names]) if plan.canary and i == 1 else []
            judged: list[str] = []
            if plan.canary and i == 1 and judge_canary is not None and not bad and not fell:
                board.says(f"canary, batch 1: {', '.join(names)} judged against the release before")
                try:
                    judged_window = judge_canary(group, [h for g in groups[1:] for h in g])
                except KeyboardInterrupt:  # the summary said the canary `ok`, as if a judge had passed it
                    for h in group:
                        results[h.name] = not_judged(results[h.name])
                    raise
                if not judged_window.ok:
                    judged = judged_window.reasons()[:3]
                    for h in group:  # back on the release before; the router's finish lists it again
                        results[h.name] = judged_back(h, results[h.name], judged, put_back_canary,
                                                      hooks, say_for)
                        board.update(h.name, results[h.name].status, results[h.name].error or "")
            failed += len(bad) + len(group if judged else [])
            batches.append(BatchRecord(i, tuple(names),
                                            DeployStatus.FAILED if bad or fell or judged else DeployStatus.OK,
                                            tuple(bad or (names if judged else [])), plan.canary and i == 1,
                                            tuple(fell), started, now("milliseconds"),
                                            round(time.monotonic() - start, 1)))
            not_back = [h.name for h in group if judged and not put_back_on(results[h.name])]
            stopped = rollout.stop_after(i, len(groups), plan.canary, bad, failed, limit, len(hosts), fell, judged,
                                         not_back)
    except KeyboardInterrupt as exc:
        interrupted(futures, said=isinstance(exc, parallel.Interrupted))
    finally:
        pool.shutdown()
    for h in hosts:  # the batches an interrupt kept from starting
        if h.name not in results:
            results[h.name] = DeployResult(h.name, DeployStatus.SKIPPED, error=f"{h.name}: not started: {stopped}")
            board.update(h.name, DeployStatus.SKIPPED, "not started")
    in_order = [results[h.name] for h in hosts]
    router = None
    if hooks:
        try:
            router = hooks.finish(hosts, in_order)  # puts back every replica that serves
        except KeyboardInterrupt:  # Ctrl-C again: said, never hidden behind a traceback
            was_interrupted = True
            router = RouterReport(RouterRun.INTERRUPTED, hooks.host.name, DeployStatus.FAILED,
                                  events=tuple(hooks.events),
                                  error=f"{hooks.host.name}: interrupted while the router was brought to the "
                                        "replicas that serve: deploy again to finish it")
    return Rollout(plan, in_order, seconds, batches, stopped, was_interrupted, background, pending_deploys, router,
                   judged_window)


PUT_BACK = "put back on release"


def judged_back(host: Host, served: DeployResult, why: Sequence[str], back_job: Job | None,
                hooks: RouterHooks | None, say_for: Callable[[Host], Progress]) -> DeployResult:
    """A canary host its judge did not pass, put back on the release before (`back_job`, a rollback): failed,
    with why and where it was left."""
    head = f"{host.name}: the canary did not pass its judge ({'; '.join(why)})"
    if back_job is None:
        return replace(served, status=DeployStatus.FAILED, error=f"{head}; left on release {served.release}")
    try:
        back = back_job(host, say_for(host), hooks)
    except FleetError as exc:
        back = DeployResult(host.name, DeployStatus.FAILED, error=str(exc))
    where = f"{PUT_BACK} {back.release}" if back.status == DeployStatus.OK else \
        f"not put back: {back.error}"
    return replace(served, status=DeployStatus.FAILED, error=f"{head}; {where}")


def put_back_on(result: DeployResult) -> bool:
    """Whether judged_back put the canary host back on the release before."""
    return f"; {PUT_BACK} " in (result.error or "")


def canary_misses(results: Sequence[DeployResult]) -> list[str]:
    """What keeps a canary's hosts that serve from passing it: each that served only by falling back to a later
    rung, and each left `unchanged` (it deployed nothing, so it proves nothing about the change)."""
    out = []
    for r in results:
        if r.status == DeployStatus.UNCHANGED:
            out.append(f"{r.host} unchanged (release {r.release} already served this playbook: nothing was tried)")
        elif why := r.fell_back():
            out.append(f"{r.host} {why}")
    return out


def put_back(host: Host, path: Path, hooks: RouterHooks) -> str:
    """How an operator puts back a replica a run gave up on (--host-timeout): the deploy again, whose recovery
    closes what the abandoned one left and which puts the replica back in the router once it serves."""
    return (f"it may be out of the router on {hooks.host.name}: `inv deploy --host {host.name} --playbook {path}` "
            "puts it back once it serves")


GRACE_MAX_S = 300.0  # the most a run waits, after --host-timeout, for the deploys it gave up on


def settle(plan: Rollout, grace: float, hooks: RouterHooks | None = None,
           path: Path | None = None) -> tuple[Rollout, list[str]]:
    """Give the deploys that outlived --host-timeout up to `grace` seconds more to end on their own budgets
    (falling back where they fail). One that ended is reported as it ended (still a failure of the run: it
    missed its deadline) and, behind a router, put back in it when it serves. Returns the rollout so reported,
    and the hosts whose deploy still runs then, which the caller abandons: their threads end with the process,
    and the next run on such a host takes over its lock and recovers it."""
    if not plan.pending:
        return plan, []
    try:
        wait(list(plan.pending.values()), timeout=grace)
    except KeyboardInterrupt:  # the operator stops waiting: the summary still comes
        pass
    where = {h.name: i for i, h in enumerate(plan.hosts)}
    left, results = [], list(plan.results)
    for name, f in plan.pending.items():
        if not f.done():
            left.append(name)
            continue
        exc = f.exception()
        late = f.result() if exc is None else DeployResult(name, DeployStatus.FAILED, error=f"{name}: {exc}")
        late = replace(late, error=(f"{late.error + '; ' if late.error else ''}{name}: ended {late.status} after "
                                    "--host-timeout gave up on it"))
        if hooks:
            late = hooks.after(plan.hosts[where[name]], late)
            if late.status not in SERVING and path is not None:
                late = replace(late, error=f"{late.error}; {put_back(plan.hosts[where[name]], path, hooks)}")
        results[where[name]] = late
    router = plan.router
    if hooks and router is not None:  # the late replicas' moves in and out of the router
        router = replace(router, events=tuple(hooks.events))
    return replace(plan, results=results, router=router), left
