"""One run on one host, written once: every operation that changes a host goes through `host_run`.

    open the session -> take the lock -> recover what a dead run left -> the operation's body
    -> end the run (the current release's unit enabled, no other it wrote; the copies its writes kept dropped)
    -> release the lock -> close

Whatever the body raises (an error, Ctrl-C), the host is left as the operation promised or as it was:
- a release the run opened and left in progress, or a rollback it marked, belongs to the next run's recovery
  (the lock is released; that recovery puts back the last release that served);
- otherwise a unit the body stopped outside a release (`stop_unit`: a GPU reset) runs again if it ran before,
  and the error says so in its one line. Such a unit is named on the host first (STOPPED_MARK), so when the
  controller dies or the link drops before it runs again, the next run under the lock starts it.
A link lost under the body is said as such and leaves the lock to the next run's recovery (its owner, this
process, is provably dead by then). Bodies never take a lock, open a release run or write a rollback mark
themselves (tests/unit/test_contracts.py keeps it so).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from paramiko import SSHException

from fleet.deploy import boot, recovery, restore
from fleet.deploy.release_run import ReleaseRun
from fleet.errors import FleetError
from fleet.host import lock as hostlock
from fleet.host.releases import ROLLBACK_MARK, STOPPED_MARK, Release, ReleaseStore, now
from fleet.host.session import RUNNING, ConnectionLost, HostSession, one_line
from fleet.inventory import Host
from fleet.outcomes import ReleaseStatus
from fleet.playbook import Playbook
from fleet.progress import Progress, quiet
from fleet.ssh.connect import ConnectOptions

Recover = Callable[[HostSession, hostlock.Lock], list[str]]
NOT_STARTED = "starting it again failed"
STARTED_AGAIN = "was started again"
CAME_BACK = "came back with the boot (enabled)"  # a unit a reboot started on its own: nothing for fleet to start
RAN = RUNNING | {"deactivating"}  # a unit caught mid-restart ran: it is started again after
# What `systemctl is-active` prints (systemd's unit active states); anything else is no answer.
UNIT_STATES = frozenset({"active", "reloading", "inactive", "failed", "activating", "deactivating", "maintenance",
                         "refreshing"})


@dataclass
class HostRun:
    """A run under the host's lock: its session, what recovery did first, and what the run has handed to the
    next run's recovery (a release in progress, a rollback mark)."""

    session: HostSession
    lock: hostlock.Lock
    unit: str | None
    progress: Progress
    recovered: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # units that ran until this run stopped them (stop_unit)
    router: list[str] = field(default_factory=list)  # the playbook router's unit on this host, stopped too
    releases: list[ReleaseRun] = field(default_factory=list)
    marked: bool = False  # a rollback mark written by this run and not yet removed
    lock_kept: bool = False  # carried through a reboot: released by the caller on the next boot
    end_problem: str | None = None  # why the run's end (its kept copies dropped, its lock released) failed
    serving: boot.Serving | None = None  # the unit settled for boot where it is not `unit` (the router's)

    @property
    def host(self) -> Host:
        return self.session.host

    @property
    def boot(self) -> boot.Serving | None:
        """The unit whose start at boot the run settles when it ends (None: it writes no unit)."""
        return self.serving or (boot.Serving(self.unit) if self.unit is not None else None)

    def writes_unit(self, unit: str) -> None:
        """The unit whose files the run may write, known only once the body's recovery chose its playbook."""
        self.unit = unit

    def recovered_first(self, notes: list[str]) -> None:
        """What recovery closed before the body ran (what a dead earlier run left)."""
        self.recovered = [*self.recovered, *notes]

    def end_failed(self, problem: str) -> None:
        """The run's end failed, not raised (`strict_end` False): said with its result."""
        self.end_problem = problem

    def lock_goes_with_run(self) -> None:
        """The body failed before any reboot: a lock it meant to keep through one is released with the run."""
        self.lock_kept = False

    def open_release(self, store: ReleaseStore, release: Release, **opened: Any) -> ReleaseRun:
        """The release, in progress on the host: until it is closed, a failure leaves it to recovery."""
        run = ReleaseRun.open(store, release, **opened)
        self.releases.append(run)
        return run

    def stop_unit(self, unit: str, timeout: float = 120.0) -> str:
        """Stop `unit` outside any release (a GPU reset, say); its state before. One that ran is started again
        when the run fails."""
        state = self.session.is_active(unit)
        if state not in UNIT_STATES:  # garbage, or systemd not answering: whether it runs is unknown
            raise FleetError(f"{self.host.name}: `systemctl is-active {unit}` answered {state[:80]!r}: whether "
                             f"{unit} runs is unknown; nothing was stopped")
        if state in RAN:  # deactivating: caught mid-restart, it runs again after
            self.name_for_restart(unit)  # first: a run that dies from here on leaves it to the next run
        self.session.stop(unit, timeout=timeout)
        return state

    def name_for_restart(self, unit: str) -> None:
        """`unit` ran and is (or is about to be) stopped by this run: named on the host (STOPPED_MARK), so the
        next run under the lock starts it if this one dies before it does (a reboot stops it too)."""
        if unit not in self.stopped:
            self.stopped.append(unit)
            self._mark()

    def name_router_for_restart(self, unit: str) -> None:
        """The playbook router's unit on this host, stopped by this run (a reboot): named in the mark apart
        from the host's own units, so only a run that knows the router (`host_run(router=...)`) starts it."""
        if unit not in self.router:
            self.router.append(unit)
            self._mark()

    def _mark(self) -> None:
        self.session.write_atomic(STOPPED_MARK, json.dumps({"units": self.stopped, "router": self.router,
                                                            "at": now()}).encode(), 0o600)

    def mark_rollback(self, **what: Any) -> None:
        """Marked first: a run that dies from here on leaves the next run's recovery to put `current` back."""
        self.session.write_atomic(ROLLBACK_MARK, json.dumps({**what, "at": now()}).encode(), 0o600)
        self.marked = True

    def unmark_rollback(self, check: bool = True) -> None:
        self.session.remove(ROLLBACK_MARK, check=check)
        self.marked = False

    def keep_lock_through_reboot(self) -> hostlock.Lock:
        """The lock stays on the host (/var/lib outlives a reboot): no deploy starts on a half-recovered host.
        The caller releases it on the next boot with `release_after_reboot`."""
        self.lock_kept = True
        return self.lock

    def handed_over(self) -> bool:
        """The next run's recovery owns the put-back: a release left in progress, or a rollback mark."""
        return self.marked or any(r.release.status == ReleaseStatus.IN_PROGRESS for r in self.releases)


def started_again(notes: list[str]) -> bool:
    """Whether a run's clean-up (a dead run's stop mark) started a unit again, by what it said."""
    return any(STARTED_AGAIN in note for note in notes)


def release_after_reboot(session: HostSession, lock: hostlock.Lock, stopped: list[str],
                         keep_mark: bool = False, router: str | None = None) -> list[str]:
    """On the new boot: the units the run stopped (`stopped`, and those its mark names) started again (the boot
    started an enabled one already; a unit an older fleet left disabled, the router's too, nothing else starts),
    then the lock it kept through the reboot released.
    What was done or why not, never raised."""
    said = [f"{unit} {CAME_BACK}" for unit in stopped if _runs(session, unit)]
    try:
        said += start_stopped(session, stopped, keep_mark, router)
    except FleetError as exc:
        said.append(f"starting {', '.join(stopped) or 'the stopped units'} again failed ({_first_line(exc)})")
    try:
        session.release_lock(lock)
    except FleetError as exc:
        said.append(f"the host lock: {exc}")
    return said


def _runs(s: HostSession, unit: str) -> bool:
    """Whether the unit runs; False where that is not known (start_stopped asks again and starts it)."""
    try:
        return s.unit_running(unit)
    except FleetError:
        return False


def start_stopped(s: HostSession, also: list[str] | None = None, keep_mark: bool = False,
                  router: str | None = None) -> list[str]:
    """The units a run stopped and named in STOPPED_MARK (a dead run's, or one carried through a reboot), and
    `also`, started again, the mark removed once each runs; what was done. The caller holds the lock, so the
    mark's writer is gone. `router`: the playbook router's unit when this host is its router's host (the mark's
    `router` entry is started only when it names that unit; a run that does not know the router leaves it)."""
    raw, units, said = s.read(STOPPED_MARK), list(also or []), []
    if raw is not None:
        try:
            mark = json.loads(raw)
            named, routed = mark["units"], mark.get("router", [])
            # only this host's own unit (and the router's, as the caller knows it): a mark naming another
            # (poweroff.target) is none of fleet's writing
            if not (isinstance(named, list) and all(isinstance(u, str) and u == s.host.unit for u in named)
                    and isinstance(routed, list) and all(isinstance(u, str) for u in routed)
                    and (router is None or all(u == router for u in routed))):
                raise TypeError(named)
            units += [u for u in [*named, *(routed if router else [])] if u not in units]
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):  # not fleet's writing: none started
            said.append(f"removed a stop mark fleet did not write: {one_line(raw[:200].decode(errors='replace'), 80)}")
    said += [note for note in (_unit_back(s, unit) for unit in units) if note]
    if raw is None or keep_mark:
        return said
    if not any(NOT_STARTED in note for note in said):
        s.remove(STOPPED_MARK)  # kept while a unit did not start: the next run tries again
    return said


def deploy_recovery(book: Playbook | None, unit: str, say: Progress) -> Recover:
    """The recovery of a host's own releases (deploy, rollback, tune), with the playbook to put one back with."""
    return lambda s, lock: recovery.after_lock(s.conn, s.host, book, unit, lock, say)


def lock_only(say: Progress) -> Recover:
    """No release to recover (recover, bench): the dead owner's lock taken over is said, nothing more."""
    def recover(_: HostSession, lock: hostlock.Lock) -> list[str]:
        if lock.recovered:
            say(lock.recovered)
        return [lock.recovered] if lock.recovered else []
    return recover


@contextmanager
def host_run(host: Host, opts: ConnectOptions | None, purpose: str, *, unit: str | None, recover: Recover,
             progress: Progress = quiet, session: HostSession | None = None,
             strict_end: bool = True, router: str | None = None,
             serving: boot.Serving | None = None) -> Iterator[HostRun]:
    """The run skeleton (see the module's doc). `unit`: the unit whose files the run may write (their kept
    copies are dropped when it ends; None: it writes none); `recover`: what a dead run left, closed first;
    `session`: one already open (the caller closes it), else one is opened and closed here; `strict_end` False:
    a run's end that fails (a node lost mid-deploy keeps its lock) is `end_problem`, not raised; `router`: the
    playbook router's unit when this host is its router's host (a dead recover's mark may name it); `serving`: the
    unit the run settles for boot when it is not `unit`'s under the host's releases (the router's, under its own)."""
    own = session is None
    s = session or HostSession.open(host, opts)
    try:
        lock = s.acquire_lock(purpose)
        run = HostRun(s, lock, unit, progress, serving=serving)
        try:
            run.recovered_first(recover(s, lock))
            run.recovered_first([f"after a dead run: {note}" for note in start_stopped(s, router=router)])
            yield run
        except BaseException as exc:
            _settle_failed(run, exc)
            raise
        try:
            _end(run)
        except Exception as exc:
            if strict_end:
                raise
            run.end_failed(f"its lock could not be released: {exc}")
    except (EOFError, OSError, SSHException) as exc:  # an SFTP or channel call on a link that died
        s.lost(f"mid-{purpose.split()[0]}", exc)
        raise
    finally:
        if own:
            s.close()


def _end(run: HostRun) -> None:
    """The run ended as the body returned: the copies its writes kept dropped, the lock released (not one kept
    through a reboot)."""
    if run.lock_kept:
        return
    if run.stopped or run.router:  # the body started them again (its promise): the mark did its job; one left
        try:  # names units that run: the next run's start finds nothing to start and removes it
            run.session.remove(STOPPED_MARK)
        except ConnectionLost:
            raise
        except FleetError as exc:
            run.progress(f"the stop mark stays ({_first_line(exc)}): the next run removes it")
    if run.boot is not None:
        _settle_boot(run)
    if run.unit is not None:
        restore.end_run(run.session.conn, run.host, run.unit)
    try:
        run.session.release_lock(run.lock)
    except (ConnectionLost, hostlock.HostLockError):  # lost, or someone else's lock stands there now: as it is
        raise
    except FleetError as exc:  # a release that failed or timed out (it may have run): said as what it leaves
        unlock = f"inv unlock --host {run.host.name} --token {run.lock.token}"
        raise hostlock.HostLockError(f"{exc}; the host lock may still be held: the next fleet run from this "
                                     f"machine takes it over, or `{unlock}`") from None


def _settle_boot(run: HostRun) -> None:
    """What a boot starts made what serves now (fleet.deploy.boot), said on the progress; a failure is said
    there too (the next run settles it again), a lost link raised."""
    settles = run.boot
    assert settles is not None
    try:
        said = boot.settle(run.session, settles.unit, settles.root)
    except ConnectionLost:
        raise
    except FleetError as exc:
        said = [f"the unit that starts at boot could not be settled ({_first_line(exc)}): `inv status` says "
                "whether it is enabled"]
    for line in said:
        run.progress(line)


def _settle_failed(run: HostRun, exc: BaseException) -> None:
    """After the body raised: the unit back as it ran (unless recovery owns the put-back), the lock released
    (unless the link is gone). What the skeleton had to do is added to the error's one line."""
    if _link_gone(run.session, exc):
        return  # nothing reaches the host: the lock and what the run left are the next run's recovery's
    notes: list[str | None] = []
    if not run.handed_over() and (run.stopped or run.router):
        notes += [_unit_back(run.session, unit) for unit in [*run.stopped, *run.router]]
        if not any(note and NOT_STARTED in note for note in notes):
            notes.append(_attempted(lambda: run.session.remove(STOPPED_MARK), "removing the stop mark"))
    if not run.handed_over() and run.boot is not None:  # what serves is settled: it is what a boot starts
        notes.append(_attempted(lambda: _settle_boot(run), "enabling the serving unit"))
    run.lock_goes_with_run()  # a reboot that was not sent
    try:
        run.session.release_lock(run.lock)
        if any(notes):
            notes.append("the host lock was released")
    except Exception as problem:  # noqa: BLE001 - said with the body's own error
        notes.append(f"the host lock could not be released ({_first_line(problem)})")
    if any(notes):
        _add_to_line(exc, [n for n in notes if n], run.progress)


def _unit_back(s: HostSession, unit: str) -> str | None:
    """The unit started again when it stopped under the failed run (a start that fails is tried once more);
    what became of it (None: it still runs)."""
    problem: BaseException | None = None
    for _ in range(2):
        try:
            if s.unit_running(unit):
                return None
            if why := restore.installed_problem(s, unit):  # its venv's owner may have changed
                return f"{unit} was stopped and {NOT_STARTED}: the owner rule refuses it ({why})" + _boots(s, unit)
            s.start(unit)
            state = one_line(s.unit_state(unit).get("ActiveState", "unknown"), 40)
            return f"{unit} {STARTED_AGAIN} ({state})"
        except ConnectionLost as exc:  # no second try over a dead link
            problem = exc
            break
        except Exception as exc:  # noqa: BLE001 - said with the body's own error
            problem = exc
    return f"{unit} was stopped and {NOT_STARTED} ({_first_line(problem) if problem else '?'})"


def _boots(s: HostSession, unit: str) -> str:
    """A unit left stopped by the owner rule that is still enabled, said: the next boot starts it as installed."""
    if s.unit_file_states([unit]).get(unit, "") not in boot.STARTS_AT_BOOT:
        return ""
    return f"; it is still enabled, so a boot starts it as it is (`systemctl disable {unit}` until it is fixed)"


def _attempted(step: Callable[[], object], what: str) -> str | None:
    """A step of the skeleton's own whose failure is said, never raised."""
    try:
        step()
    except Exception as problem:  # noqa: BLE001 - said with the body's own error
        return f"{what} failed ({_first_line(problem)})"
    return None


def _link_gone(s: HostSession, exc: BaseException) -> bool:
    """This session's link is gone under `exc` (another host's lost link, in a multi-node run, is not)."""
    if not isinstance(exc, (EOFError, OSError, SSHException, ConnectionLost)):
        return False
    with suppress(ConnectionLost):
        s.lost("", exc)
        return False
    return True


def _first_line(exc: BaseException) -> str:
    return one_line(str(exc)) or type(exc).__name__


def _add_to_line(exc: BaseException, notes: list[str], say: Progress) -> None:
    """An operator's error (one line) gains what the skeleton did; anything else is said on the progress."""
    text = "; ".join(notes)
    if isinstance(exc, FleetError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]}; {text}",)
    else:
        say(f"interrupted ({type(exc).__name__}): {text}")
