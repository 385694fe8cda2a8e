"""`inv rollback --to before-fleet` on one host: the unit, env and key file as fleet found them before its first
deploy, every patch set reverted, the unit stopped and `current` cleared.

The run is marked first (/var/lib/fleet/rollback.json, as `inv rollback` marks its own): a run that dies, or fails
without putting the host back, leaves the next deploy's or rollback's recovery to put the current release back.
A failure that put everything back (the files as the server runs them, its patch sets, the unit running) removes
the mark, so the next run does not restart a server that serves."""

from __future__ import annotations

from fleet.deploy import restore
from fleet.deploy.hostrun import host_run, lock_only
from fleet.deploy.results import Attempt, DeployResult
from fleet.errors import FleetError
from fleet.host import venvs
from fleet.host.found_files import BeforeFleet, BeforeFleetFile
from fleet.host.releases import ReleaseStore
from fleet.host.render import env_file, key_file, unit_file, unit_of_files
from fleet.host.service import sha256
from fleet.host.session import ConnectionLost, HostSession
from fleet.inventory import Host
from fleet.outcomes import DeployStatus, Outcome
from fleet.progress import Progress, quiet, ticking
from fleet.ssh.connect import ConnectOptions

BEFORE_FLEET = "before-fleet"  # `inv rollback --to before-fleet`
RUNNING = ("active", "activating", "reloading")
STOP_S = 120  # the unit's stop and its processes off the GPUs


class Settled(FleetError):
    """The run failed and put the host back as it was (serving its current release): no recovery needed."""


def before_fleet(host: Host, unit: str | None, opts: ConnectOptions, progress: Progress = quiet,
                 session: HostSession | None = None) -> DeployResult:
    """Back to what the host had before fleet's first deploy: every patch set reverted, the unit, env and key
    file as fleet found them (or removed, where there were none), the unit stopped and `current` cleared. The
    releases and fleet's launcher stay, so `inv rollback --to <id>` can come back. `unit`: the --playbook's
    serve.unit; None: the unit the current release serves from (a playbook's serve.unit wins over the inventory's
    `unit`), else the inventory's."""
    with host_run(host, opts, "rollback to before fleet", unit=None, recover=lock_only(progress),
                  progress=progress, session=session) as run:
            store = ReleaseStore.on(run.session)
            current = store.current()
            unit = unit or (unit_of_files(current.files) if current is not None else None) or host.unit
            record = BeforeFleet.on(run.session)
            files = record.manifest()
            unit_path = unit_file(unit)
            wanted = [unit_path, env_file(unit)]
            unknown = [p for p in wanted if p not in files]
            wanted += [p for p in (key_file(unit),) if p in files]  # recorded where fleet wrote a key
            if unknown:
                raise FleetError(f"{host.name}: what stood at {', '.join(unknown)} before fleet was not recorded "
                                 "(fleet wrote it before it kept such a record); nothing was changed")
            copies = {p: record.copy(p) for p in wanted if not files[p].get("absent")}
            damaged = [p for p, data in copies.items() if data is None or sha256(data) != files[p]["sha256"]]
            if damaged:
                raise FleetError(f"{host.name}: the before-fleet copy of {damaged[0]} is missing or damaged; "
                                 "nothing was changed")
            served = venvs.release_venv(store, host, current) if current is not None else host  # its patch sets'
            run.mark_rollback(to=BEFORE_FLEET)
            try:
                _undo_fleet(run.session, served, unit, copies, wanted, files, progress)
            except Settled:
                run.unmark_rollback(check=False)
                raise
            run.unmark_rollback()
            return DeployResult(host.name, DeployStatus.OK, release=BEFORE_FLEET,
                                attempts=[Attempt(BEFORE_FLEET, Outcome.READY, "restored; the unit is stopped and "
                                                  f"disabled (systemctl enable --now {unit} if it should run)", 0)])


def _undo_fleet(s: HostSession, served: Host, unit: str, copies: dict[str, bytes | None], wanted: list[str],
                files: dict[str, BeforeFleetFile], progress: Progress) -> None:
    """`served`: the host as its current release's unit runs it (the venv its patch sets are in).
    The files first, while the unit runs on what systemd and the server loaded (a write that fails puts back
    those already written, by rename); then the patch sets; then the stop. A failure raises Settled when the host
    was put back as it was, else a FleetError that leaves the mark for the next run's recovery."""
    writes = [(p, d, int(files[p]["mode"], 8)) for p, d in copies.items() if d is not None]
    written = _write_all(s, writes)
    try:
        problem = restore.set_patches(s.conn, served, [], progress)  # a hand-edited file refuses: nothing changed
    except FleetError as exc:  # a revert that timed out may have run: the files and patch sets go back
        raise _back_on_release(s, served, unit, written, exc, progress) from None
    if problem:
        undone, ok = _undo_writes(s, written, whole=True)
        raise (Settled if ok else FleetError)(f"{s.name}: {problem}; {undone}")
    progress(f"stopping {unit} and emptying the GPUs (budget {STOP_S}s)")  # where it stands too, as it goes on
    try:
        with ticking(progress, "stop", STOP_S):
            s.stop_and_empty_gpus(unit, STOP_S, progress)
    except FleetError as exc:  # the release's files and patch sets go back, and it serves again
        raise _back_on_release(s, served, unit, written, exc, progress) from None
    for path in copies:
        progress(f"put back {path} as fleet found it")
    s.disable_unit(unit)  # fleet enabled it with its release; a boot must not start what is handed back stopped
    for path in (p for p in wanted if p not in copies):
        s.remove(path)
        progress(f"removed {path} (there was none before fleet)")
    s.daemon_reload()
    s.drop_kept(wanted)
    ReleaseStore.on(s).clear_current()


def _back_on_release(s: HostSession, served: Host, unit: str, written: list[tuple[str, str | None]],
                     exc: FleetError, progress: Progress) -> FleetError:
    """After a failure past the writes: the files as the release has them, its patch sets, its unit running. The
    error to raise: Settled when all of that held; a lost link as it is (the mark is the next run's)."""
    if isinstance(exc, ConnectionLost):
        return exc
    why = str(exc)
    try:
        undone, files_ok = _undo_writes(s, written)
        became, serves = _serve_again(s, served, unit, progress)
    except ConnectionLost as lost:
        return FleetError(f"{why}; the link was lost putting the release back ({lost}): the next deploy or rollback "
                          "puts it back")
    except FleetError as lost:
        return FleetError(f"{why}; putting the release back failed too ({lost}): the next deploy or rollback puts "
                          "it back")
    return (Settled if files_ok and serves else FleetError)(f"{why}; {undone}; {became}")


def _write_all(s: HostSession, writes: list[tuple[str, bytes, int]]) -> list[tuple[str, str | None]]:
    """Each (path, data, mode) written, what stood there kept beside it (write.sh's keep); (path, sha256 of what
    stood there, None: nothing) for each. When one write fails, those already written go back (_undo_writes) and
    the failure is raised with what became of them (Settled when all went back)."""
    done: list[tuple[str, str | None]] = []
    for path, data, mode in writes:
        try:
            old = s.read(path)
            done.append((path, None if old is None else sha256(old)))  # before: a write that timed out may have run
            s.write_atomic(path, data, mode, keep=True)
        except FleetError as exc:  # a failed write, or one whose outcome is unknown (a timeout, a lost link)
            if isinstance(exc, ConnectionLost):
                raise
            try:
                undone, ok = _undo_writes(s, done, whole=True)
            except FleetError as lost:
                undone, ok = f"what was written could not be put back ({lost}): the next deploy or rollback finds it", \
                    False
            raise (Settled if ok else FleetError)(f"{s.name}: {exc}; {undone}") from None
    return done


def _undo_writes(s: HostSession, done: list[tuple[str, str | None]],
                 whole: bool = False) -> tuple[str, bool]:
    """What _write_all wrote, back as it stood: by rename from the kept copy (no free space needed), or removed
    where nothing stood. What it says of the host (`whole`: the writes were all that had changed), and whether
    every file went back."""
    stuck = []
    for path, old in reversed(done):
        if old is None:
            s.remove(path, check=False)
        elif sha256(s.read(path) or b"") != old and not s.put_back_kept(path, old):
            stuck.append(path)
    s.drop_kept([p for p, _ in done])
    if stuck:
        return f"{', '.join(stuck)} could not be put back as it stood (see `inv status`)", False
    return "the files already written were put back" + ("; nothing was changed" if whole else ""), True


def _serve_again(s: HostSession, served: Host, unit: str, progress: Progress) -> tuple[str, bool]:
    """After a revert or a stop that failed (maybe after `systemctl stop` ran): the current release's patch sets
    back in its venv, and its unit started again if it no longer runs. What became of the host, and whether it
    serves as before."""
    current = ReleaseStore.on(s).current()
    if current is None:
        return "no release is current to put back", True
    problem = restore.set_patches(s.conn, served, current.patch_sets(), progress)
    if problem:
        return (f"release {current.id}'s patch sets could not be put back ({problem}): the next deploy or rollback "
                "puts them back"), False
    if s.unit_state(unit).get("ActiveState") in RUNNING:
        return f"release {current.id} still serves, its patch sets back", True
    if why := restore.installed_problem(s, unit):
        return f"release {current.id} was not started again: the owner rule refuses it ({why})", False
    s.start(unit, check=False)
    state = s.unit_state(unit).get("ActiveState", "unknown")
    return f"the stop had gone through: release {current.id} was started again (the unit is {state})", \
        state in RUNNING
