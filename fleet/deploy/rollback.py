"""`inv rollback` and `inv history` on one host: an earlier known-good release back byte for byte and made
current once it serves; the releases a host keeps."""

from __future__ import annotations

import difflib
from dataclasses import replace

from fabric import Connection

from fleet import playbook
from fleet.deploy import recovery, restore
from fleet.deploy.attempt import BeforeStop
from fleet.deploy.hostrun import HostRun, host_run
from fleet.deploy.inputs import load_playbook
from fleet.deploy.results import Attempt, DeployResult
from fleet.errors import FleetError, InputError
from fleet.host import probe_run, venvs
from fleet.host.facts import stack_versions
from fleet.host.lock import Lock
from fleet.host.releases import (
    Release,
    ReleaseStore,
    node_of,
    stack_drift,
    versions_of,
)
from fleet.host.session import ConnectionLost, HostSession
from fleet.inventory import Host
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus
from fleet.playbook import Playbook
from fleet.progress import Progress, quiet
from fleet.ssh.connect import ConnectOptions, open_connection


def target(store: ReleaseStore, host: Host, to: str | None) -> Release:
    """`to` if it served, else the newest release that served before the current one."""
    if to:
        found = store.load(to)
        if found is None:
            raise FleetError(f"{host.name}: no release {to}{nearest_id(store, to)} (see `inv history --host "
                             f"{host.name}`)")
        if found.status != ReleaseStatus.OK:
            raise FleetError(f"{host.name}: release {to} never served ({found.status}); refusing")
        return found
    earlier = store.last_good_before_current()
    if earlier is None:
        raise FleetError(f"{host.name}: no earlier known-good release to roll back to")
    return earlier


def nearest_id(store: ReleaseStore, to: str) -> str:
    """ "; did you mean 20261206T112544Z-c214?" for an id one or two characters off one of the host's releases (ids
    of one day share most of their characters: only a near one is named), else nothing."""
    near = difflib.get_close_matches(to, [r.id for r in store.list()], n=1, cutoff=0.9)
    return f"; did you mean {near[0]}?" if near else ""


def recorded_playbook(store: ReleaseStore, host: Host, to: str | None) -> Playbook:
    """The playbook the release a rollback goes to was deployed with, from playbooks/ by the name it records
    (a name the host sends: only a playbook of that name in playbooks/, never a path)."""
    rel = store.load(to) if to else (store.last_good_before_current() or store.current())
    if rel is None:
        raise FleetError(f"{host.name}: no release to roll back to" + (f" named {to}{nearest_id(store, to)}" if to
                                                                        else ""))
    try:
        return load_playbook(str(playbook.shipped(rel.playbook)), checked=False)[0]
    except InputError as exc:
        raise InputError(f"{host.name}: release {rel.id} was deployed with playbook {rel.playbook!r}, which "
                         f"cannot be loaded ({exc}); give --playbook PATH") from None


def rollback(host: Host, book: Playbook | None, opts: ConnectOptions, to: str | None,
             progress: Progress = quiet, before_stop: BeforeStop | None = None) -> DeployResult:
    """Restore a release (default: the one before the current) byte for byte and make it current again.
    `book`: the playbook it was deployed with (None: the one the release records); another one is refused,
    since its port, API key and health check would judge the wrong server. `before_stop`: called once, after
    the checks and before the server stops (a replica taken out of its router and drained)."""
    chosen: list[Playbook] = []

    def recover(s: HostSession, lock: Lock) -> list[str]:
        """Under the lock, before recovery: the playbook the rollback judges with (the recovery puts back with it)."""
        store = ReleaseStore(s.conn, s.host)
        refuse_node(host, store.current(), book)
        chosen.append(book or recorded_playbook(store, host, to))
        return recovery.after_lock(s.conn, s.host, chosen[0], chosen[0].serve.unit or host.unit, lock, progress)

    with host_run(host, opts, "rollback", unit=None, recover=recover, progress=progress) as run:
        run.writes_unit(chosen[0].serve.unit or host.unit)
        return _rollback(run, chosen[0], to, progress, before_stop)


def _rollback(run: HostRun, book: Playbook, to: str | None, progress: Progress,
              before_stop: BeforeStop | None = None) -> DeployResult:
    conn, host = run.session.conn, run.host
    store = ReleaseStore(conn, host)
    back = target(store, host, to)
    refuse_node(host, back, book)
    if back.playbook != book.name:
        raise FleetError(f"{host.name}: release {back.id} served playbook {back.playbook}, not {book.name}: "
                         f"roll back with --playbook {back.playbook}, or leave --playbook out")
    progress(f"rolling back to {back.id} ({back.rung})")
    own = venvs.recorded(back.facts)  # a release of packages: pins runs in its own venv: no install
    seen = probe_run.probe_on(conn, replace(host, venv=own) if own else host, progress)
    serving = stack_versions(seen)  # what the rolled-back release will run: the venv as found, not as recorded
    drift = stack_drift(versions_of(back.facts), serving)
    notes = [f"release {back.id} ran {', '.join(drift)} now in the venv: a rollback puts back the unit, "
             "env and patch sets, not packages (install the release's versions by hand)"] if drift else []
    for note in notes:
        progress(f"warning: {note}")
    before = store.current()
    refuse_owner(conn, host, store, back)
    if before_stop is not None:
        before_stop(conn)
    run.mark_rollback(to=back.id, **{"from": before.id if before else None})
    attempt = _restore(conn, host, store, back, book, progress)
    problem = _made_current(store, back) if attempt.outcome == Outcome.READY else None
    if problem:
        attempt = Attempt(attempt.rung, Outcome.INSTALL_FAILED, problem, attempt.seconds)
    result = DeployResult(host.name, DeployStatus.FAILED, release=back.id, config=back.config,
                          attempts=[attempt], recovered=run.recovered, notes=notes)
    if attempt.outcome == Outcome.READY:  # the versions it went from and to (as found), as a deploy says an upgrade's
        result = replace(result, status=DeployStatus.OK, versions=serving,
                         versions_before=versions_of(before.facts) if before else {})
    else:
        error = (f"{host.name}: rollback to {back.id} failed: {problem}" if problem else
                 f"{host.name}: rollback to {back.id} did not come up: {attempt.outcome} {attempt.evidence}")
        if before is not None and before.id != back.id:
            progress(f"rollback failed: putting back release {before.id}")
            again = _restore(conn, host, store, before, book, progress)
            if again.outcome == Outcome.READY:
                problem = store.point_back(before)
                error += f"; back on release {before.id}" + (f", but {problem}" if problem else "")
            else:
                error += f"; putting back release {before.id} failed too: {again.outcome} {again.evidence}"
            result = replace(result, release=before.id, config=before.config)
        result = replace(result, error=error)
    run.unmark_rollback()
    return result


def refuse_node(host: Host, release: Release | None, book: Playbook | None) -> None:
    """A node of a multi-node deployment is never rolled back alone (its health check is one rank 1 cannot
    answer, and the nodes would end on different releases)."""
    where = node_of(release)
    if where and (book is None or book.nodes is None):
        raise FleetError(f"{host.name} is {where}: its nodes are rolled back together (inv rollback --playbook "
                         "with that playbook and every node's --host); nothing was changed")
def _made_current(store: ReleaseStore, release: Release) -> str | None:
    """`current` moved to the release that now serves; why not, when that failed (the release that was current
    then goes back, so the host never runs one release while `current` names another). A lost link raises."""
    try:
        store.mark_current(release)
    except ConnectionLost:
        raise
    except FleetError as exc:
        return f"release {release.id} served, but making it current failed: {exc}"
    return None


def refuse_owner(conn: Connection, host: Host, store: ReleaseStore, release: Release) -> None:
    """FleetError when the release's unit must not start now (restore.owner_problem), asked before anything stops;
    the dry run asks it too."""
    problem = restore.owner_problem(conn, host, store, release)
    if problem:
        raise FleetError(f"{host.name}: rollback to {release.id} refused: {problem}; nothing was changed")


def _restore(conn: Connection, host: Host, store: ReleaseStore, release: Release, book: Playbook,
             progress: Progress) -> Attempt:
    """restore.restore, a failure on the way (a full disk, a command that failed) as a failed attempt; a lost
    link still raises (the mark makes the next run's recovery finish)."""
    try:
        return restore.restore(conn, host, store, release, book, progress)
    except ConnectionLost:
        raise
    except Exception as exc:
        return Attempt(release.rung or "-", Outcome.INSTALL_FAILED, f"{type(exc).__name__}: {exc}", 0)


def history(host: Host, opts: ConnectOptions) -> tuple[list[Release], str | None]:
    conn = open_connection(host, opts)
    try:
        store = ReleaseStore(conn, host)
        return store.list(), store.current_id()
    finally:
        conn.close()
