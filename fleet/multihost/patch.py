"""`inv patch` across hosts: check, apply or revert patch sets on each host in parallel; a change is made
under the host lock together with its release record (so `inv rollback` undoes it), optionally followed
by an audit of the gates that still exclude the host's SM. A patch never stops the server (its edits take effect at
the next start); the put-back of what a dead run left does: a replica behind a router (`--playbook` with a
`router:`) is taken out of it first and put back once it serves (fleet.multihost.router), one host at a time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fleet import parallel, playbook
from fleet.deploy import recovery
from fleet.deploy.hostrun import host_run, started_again
from fleet.deploy.inputs import load_playbook
from fleet.deploy.restore import record_patch_release
from fleet.errors import FleetError, InputError
from fleet.host import lock as hostlock
from fleet.host import venvs
from fleet.host.releases import ReleaseStore
from fleet.host.session import HostSession
from fleet.inventory import Host
from fleet.multihost import router as routing
from fleet.outcomes import DeployStatus
from fleet.patches import audit as archgate
from fleet.patches.engine import PATCH_S, HostResult, apply_host, check_host, revert_host
from fleet.patches.sets import PatchSet
from fleet.playbook import Playbook
from fleet.progress import Progress, hosts_note, quiet, ticking
from fleet.ssh.connect import ConnectOptions

ACTIONS = ("check", "apply", "revert")


def run_hosts(hosts: list[Host], sets: list[PatchSet], action: str, opts: ConnectOptions | None = None,
              allow_prebuilt: bool = False, audit: bool = False, book: Playbook | None = None,
              hooks: routing.RouterHooks | None = None,
              progress_for: Callable[[Host], Progress] = lambda _: quiet,
              progress: Progress = quiet) -> list[HostResult]:
    """check | apply | revert on every host in parallel; a host that fails gets a result with its error.
    With audit, each result also carries the arch gates that still exclude the host's SM afterwards. `book`: the
    playbook a dead run's put-back uses when the current release names it; `hooks`: its router's (replicas one
    at a time, each out of the router before a put-back stops it, back once it serves). `progress` is told where
    the hosts stand while they run (a host's patch program takes up to PATCH_S: a slow one was silent until the
    table)."""
    if action not in ACTIONS:
        raise ValueError(f"patch action {action!r}: one of {', '.join(ACTIONS)}")

    cleaned: set[str] = set()  # hosts where a dead run's clean-up started the unit again

    def one(host: Host) -> HostResult:
        def out(s: HostSession) -> None:  # before a put-back stops the server: out of the router, or no stop
            if hooks is not None:
                hooks.take_out(host, s.conn, progress_for(host), strict=True)

        def recover(s: HostSession, lock: hostlock.Lock) -> list[str]:
            return _recover(s, lock, book, out if hooks is not None else None)

        session = HostSession.open(host, opts)
        conn = session.conn
        try:
            if action == "check":  # the venv the current release's unit serves from, not the inventory's
                host = venvs.serving(conn, host)
                result = check_host(conn, host, sets, allow_prebuilt)
            else:
                # One lock over the change and its release record, so no deploy slips in between.
                with host_run(host, opts, f"patch {'--revert ' if action == 'revert' else ''}"
                                          + " ".join(s.name for s in sets), unit=None, recover=recover,
                              session=session) as run:
                    store = ReleaseStore(conn, host)
                    current = store.current()  # recovery may have made a dead deploy's release current
                    if current is not None:  # its patch sets go into the venv its unit serves from
                        host = venvs.release_venv(store, host, current)
                    result = (apply_host(conn, host, sets, allow_prebuilt) if action == "apply"
                              else revert_host(conn, host, sets))
                    result = replace(result, recovered=run.recovered)
                    if started_again(run.recovered):
                        cleaned.add(host.name)
                    if result.ok and result.written:
                        result = replace(result, release=record_patch_release(conn, host, current, action,
                                                                              [s.name for s in sets]))
            if audit:
                try:
                    result = replace(result, audit=archgate.audit_host(conn, host, sets=sets))
                except FleetError as exc:
                    result = replace(result, audit_error=str(exc))
            return result
        finally:
            session.close()

    if hooks is None or action == "check":
        started: set[str] = set()
        ended: set[str] = set()

        def begun(host: Host) -> HostResult:
            started.add(host.name)
            try:
                return one(host)
            finally:
                ended.add(host.name)

        try:
            with ticking(progress, f"patch {action}", PATCH_S,
                         note=lambda: hosts_note([h.name for h in hosts], ended)):
                outcomes: list[parallel.HostOutcome[HostResult] | None] = list(parallel.run_all(
                    hosts, begun, ends=parallel.STEP_ENDS if action == "check" else PATCH_ENDS,
                    left=parallel.STEP_LEFT if action == "check" else PATCH_LEFT))
        except parallel.Interrupted as stop:  # every host's result, those a Ctrl-C left saying where they are
            raise parallel.PartlyDone([_result(h, o, action, h.name in started)
                                       for h, o in zip(hosts, stop.outcomes, strict=True)]) from None
        return [_result(h, o, action, True) for h, o in zip(hosts, outcomes, strict=True)]
    results = []
    for host in hosts:  # one replica out of the router at a time
        try:
            results.append(one(host))
        except Exception as exc:  # one host's surprise must not hide the others (as parallel.run_all)
            error = str(exc) if isinstance(exc, FleetError) else f"{host.name}: {type(exc).__name__}: {exc}"
            results.append(HostResult(host.name, action, False, error=error))
        finally:  # taken out, or started again by a clean-up: back in once it serves (waited for)
            if hooks.taken_out(host) or host.name in cleaned:
                routing.back_in(hooks, host, DeployStatus.FAILED, wait=hooks.book.budgets.ready)
    return results


PATCH_ENDS = "a patch run ends on its own, all or nothing"  # what a host under way does after a Ctrl-C
PATCH_LEFT = "the next patch, deploy or rollback there takes over its lock and puts back what it left half-done"


def _result(host: Host, outcome: parallel.HostOutcome[HostResult] | None, action: str, started: bool) -> HostResult:
    """A host's result; one a Ctrl-C left (None) says whether it never started or was left mid-run."""
    if outcome is None:
        if action == "check":
            return HostResult(host.name, action, False, error=f"{host.name}: {parallel.INTERRUPTED_ROW}")
        why = (f"interrupted while patching (Ctrl-C again): {PATCH_LEFT}" if started else
               "not started: interrupted (Ctrl-C), nothing changed")
        return HostResult(host.name, action, False, error=f"{host.name}: {why}")
    if outcome.ok and outcome.value is not None:
        return outcome.value
    return HostResult(host.name, action, False, error=outcome.error)


def _recover(s: HostSession, lock: hostlock.Lock, given: Playbook | None = None,
             before_stop: Callable[[HostSession], None] | None = None) -> list[str]:
    """What a dead run left, finished or undone before patching (as deploy, rollback and tune do), with the
    playbook the current release was deployed with (`given` when it is that playbook, else the one in
    playbooks/). When that cannot be loaded and a put-back would need it, the patch refuses with nothing changed.
    `current` is read before any change: one that cannot be read refuses with the host untouched. `before_stop`:
    called before a put-back, which stops the server."""
    conn, host = s.conn, s.host
    current = ReleaseStore(conn, host).current()
    book = given if given is not None and current is not None and given.name == current.playbook else None
    if book is None and current is not None:
        try:
            book = load_playbook(str(playbook.shipped(current.playbook)), checked=False)[0]
        except InputError:
            book = None
    left = recovery.needs_playbook(conn, host) if book is None or before_stop is not None else []
    if book is None and left:
        raise FleetError(f"{host.name}: a dead run left {', '.join(left[:3])}; putting the host back needs the "
                         f"playbook of release {current.id if current else '(none)'}, which is not in playbooks/: "
                         "run `inv deploy` or `inv rollback` with its --playbook first; nothing was changed")
    if left and before_stop is not None:  # the put-back stops the server: out of its router first
        before_stop(s)
    unit = (book.serve.unit if book is not None else None) or host.unit
    return recovery.after_lock(conn, host, book, unit, lock, lambda line: None)
