"""`inv rollback --router`: the router's unit back to an earlier router release that served, checked with a
generation through it, made current when it serves; when it does not (or a step raises), the router release that
served before goes back, by rename where the rollback's writes kept its files (a full disk too)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fabric import Connection

from fleet import parallel
from fleet.errors import FleetError
from fleet.host.releases import ROUTER_ROOT, Release, ReleaseStore
from fleet.host.session import ConnectionLost
from fleet.multihost.router import RouterHooks
from fleet.multihost.router_report import RouterReport, RouterRun, worker_list
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus

ENDS = "the router's rollback ends on its own; a router release that does not serve puts back the one before"


def waited(hooks: RouterHooks, to: str | None, notice: Callable[[str], None]) -> tuple[RouterReport, bool]:
    """rollback() on a worker thread (fleet.parallel.run_all), and whether a Ctrl-C came: the first is answered at
    once and the rollback under way ends on its own, a second stops waiting. It ran on the main thread, where a
    Ctrl-C lands inside any SSH exchange, and said a bare `interrupted`, the router's state unsaid."""
    host = hooks.host.name
    try:
        [outcome] = parallel.run_all([hooks.host], lambda _: rollback(hooks, to), notice=notice, ends=ENDS,
                                     left=parallel.DEPLOY_LEFT.replace("rollback", "rollback --router"))
    except parallel.Interrupted as stop:
        done = stop.outcomes[0]
        if done is None:  # a second Ctrl-C: left mid-step
            return RouterReport(RouterRun.INTERRUPTED, host, DeployStatus.FAILED, error=(
                f"{host}: interrupted while rolling back the router; the next deploy or rollback --router there "
                "takes over its lock and recovers what it left")), True
        return done.value if done.ok and done.value else RouterReport(RouterRun.INTERRUPTED, host, DeployStatus.FAILED,
                                                                       error=done.error), True
    if not outcome.ok or outcome.value is None:
        raise FleetError(outcome.error or f"{host}: the router's rollback failed")
    return outcome.value, False


def rollback(hooks: RouterHooks, to: str | None) -> RouterReport:
    """`inv rollback --router`: the router's unit back to an earlier known-good release (default: the newest
    before the current one), verified by a generation through it; made current when it serves."""
    host = hooks.host
    router = hooks.book.router
    assert router is not None  # RouterHooks are made for playbooks with a router section
    report = RouterReport(RouterRun.ROLLBACK, host.name, DeployStatus.FAILED, router.unit, router.port)
    with hooks.run("rollback router", lambda m: hooks.say(host.name, f"router: {m}")) as run:
        report = replace(report, recovered=tuple(run.recovered))
        conn = run.session.conn
        store = hooks.stores(conn, host, ROUTER_ROOT)
        found = store.load(to) if to else store.last_good_before_current()
        if to and (found is None or found.status != ReleaseStatus.OK):
            raise FleetError(f"{host.name}: no router release {to} that served "
                             f"(see {ROUTER_ROOT}/releases on {host.name})")
        if found is None:
            raise FleetError(f"{host.name}: no earlier known-good router release to roll back to")
        target = found
        hooks.say(host.name, f"router: rolling back to {target.id}")
        before = store.current()
        try:
            outcome, evidence = hooks.restore(conn, store, target)
            report = replace(report, release=target.id, workers=worker_list(target.config.get("workers", [])),
                             evidence=evidence)
            if outcome == Outcome.READY:
                store.mark_current(target)
                hooks.drop_kept(conn)
                return replace(report, status=DeployStatus.OK)
            why = f"router release {target.id} did not serve: {outcome} {evidence}"
        except ConnectionLost:
            raise
        except Exception as exc:  # noqa: BLE001 - a full disk, a failed mv: what served goes back
            why = f"rolling the router back to {target.id} failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
        report, back = _back_on(hooks, conn, store, before, report)
        report = replace(report, error=f"{host.name}: {why}; {back}")
        hooks.drop_kept(conn)
    return report


def _back_on(hooks: RouterHooks, conn: Connection, store: ReleaseStore, before: Release | None,
             report: RouterReport) -> tuple[RouterReport, str]:
    """After a failed router rollback: the release that served before it back (by rename where the rollback's
    writes kept its files), as a failed single-host rollback does; the report as it then is and what became of
    it, never raised."""
    if before is None:
        return report, "there was no current router release to go back to"
    try:
        outcome, evidence = hooks.restore(conn, store, before)
    except ConnectionLost:
        raise
    except Exception as exc:  # noqa: BLE001 - reported with the rollback's own error
        outcome, evidence = Outcome.INSTALL_FAILED, f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    if outcome != Outcome.READY:
        return report, f"putting back router release {before.id} failed too: {outcome} {evidence}"
    report = replace(report, release=before.id, workers=worker_list(before.config.get("workers", [])),
                     evidence=evidence)
    problem = store.point_back(before)
    return report, f"back on router release {before.id}, serving" + (f", but {problem}" if problem else "")
