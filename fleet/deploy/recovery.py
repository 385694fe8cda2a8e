"""What a dead fleet run left on a host, found and closed before the next run changes anything.

A run killed mid-deploy leaves its release "in-progress" (its journal, events.jsonl, says how far it got),
maybe a patch run "applying" (files half-patched) and temp files next to what it was writing. Under the
host lock, `recover` undoes half-applied patch runs from their backups, marks the release "interrupted"
with why, and puts the host back on its last known-good release (byte for byte, restarted, verified), or
stops the unit and reverts fleet's patches when it never had one. The caller's own run then goes ahead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from fabric import Connection

from fleet.deploy import restore
from fleet.errors import FleetError
from fleet.host import leftovers
from fleet.host import lock as hostlock
from fleet.host.releases import (
    CURRENT_TEMP,
    ROLLBACK_MARK,
    ROOT,
    HostFiles,
    Release,
    ReleaseDamaged,
    ReleaseStore,
    node_of,
)
from fleet.host.service import read_quiet, remove_file, sha256s
from fleet.inventory import Host
from fleet.outcomes import Outcome, ReleaseStatus
from fleet.patches import engine as patches
from fleet.patches.plan import BACKUP_ROOT
from fleet.playbook import Playbook


@dataclass
class Interrupted:
    """A release a dead run left in progress: the last step (and rung) its journal recorded."""

    release: Release
    last_step: str  # the last step its journal recorded
    last_rung: str | None  # the rung of that event, when it named one (a text: the journal is the host's)
    torn: int = 0  # lines of its events.jsonl skipped as torn (a writer killed mid-append, a full disk)

    @property
    def touched_host(self) -> bool:
        """Past "opened", the run had started stopping, patching or installing."""
        return self.last_step not in ("none", "opened")

    def describe(self) -> str:
        rung = self.last_rung
        return (f"release {self.release.id} ({self.release.playbook}) was interrupted after step "
                f"{self.last_step}" + (f" of rung {rung}" if rung else "")
                + (f" ({self.torn} torn line(s) of its events.jsonl skipped)" if self.torn else ""))


def find(store: ReleaseStore) -> list[Interrupted]:
    """Releases still "in-progress" in `store` (the host's own, or the router's): call only while holding the
    lock, else a live deploy looks dead."""
    found = []
    for path in leftovers.manifests_with(store.session, store.root, '"status": "in-progress"'):
        try:
            release = store.load(path.split("/")[-2])
        except ReleaseDamaged:  # not a manifest fleet wrote (a hand-made copy, say): passed over, as list() does
            continue
        if release is None or release.status != ReleaseStatus.IN_PROGRESS:
            continue
        events, torn = store.events_read(release.id)
        last = events[-1] if events else {}
        rung = last.get("rung")
        found.append(Interrupted(release, str(last.get("step", "none")), rung if isinstance(rung, str) else None,
                                 torn))
    return found


def finish_commits(store: ReleaseStore) -> list[str]:
    """Releases in `store` that served and were saved ok, but whose run died before `current` moved to them: the
    host runs their files, so they are made current (the release asked for), newest last. One line per release."""
    notes: list[str] = []
    for path in sorted(leftovers.manifests_with(store.session, store.root, '"committing": true')):
        try:
            release = store.load(path.split("/")[-2])
        except ReleaseDamaged as exc:
            notes.append(f"passed over: {exc}")
            continue
        if release is None or not release.committing or release.status != ReleaseStatus.OK:
            continue
        release.settled()
        if not runs_files_of(store.session, release):  # e.g. a fall-back put the previous one back, then died
            release.found_as(ReleaseStatus.INTERRUPTED)
            store.save(release)
            notes.append(f"release {release.id} was being made current, but the host does not run its files: "
                         "closed interrupted")
            continue
        if store.current_id() != release.id:
            store.mark_current(release)
        store.save(release)
        notes.append(f"release {release.id} served but its run died before making it current: made current")
    return notes


def close_interrupted(store: ReleaseStore, found: list[Interrupted]) -> list[str]:
    """Mark each release a dead run left in progress as interrupted, with the step it died after."""
    notes = []
    for it in found:
        it.release.found_as(ReleaseStatus.INTERRUPTED)
        it.release.add_attempt({"rung": it.last_rung or "-", "outcome": Outcome.INTERRUPTED,
                                    "evidence": f"the fleet run died after step {it.last_step}", "seconds": 0})
        store.save(it.release)
        store.event(it.release, {"step": "interrupted", "after": it.last_step})
        notes.append(it.describe() + ": marked interrupted")
    return notes


def runs_files_of(s: HostFiles, release: Release) -> bool:
    """The unit and env files installed on `s`'s host are the release's own (sha256 as recorded)."""
    files = {p: m.get("sha256") for p, m in release.files.items() if not p.startswith("before:")}
    if not files:
        return False
    found = sha256s(s, sorted(files))
    return all(found.get(p) == sha for p, sha in files.items())


def after_lock(conn: Connection, host: Host, book: Playbook | None, unit: str, lock: hostlock.Lock,
               say: Callable[[str], None]) -> list[str]:
    """First thing under the lock: the dead run's lock we took over, and what that run left (`recover`). `book`:
    the playbook to put the current release back with (None: `inv patch` when the release's own cannot be loaded,
    after `needs_playbook` found nothing that needs one)."""
    notes = [lock.recovered] if lock.recovered else []
    if lock.recovered:
        say(lock.recovered)
    notes += recover(conn, host, book, unit, say)
    restore.end_run(conn, host, unit)  # what a dead run kept for a put-back by rename: used above, or stale
    return notes


def recover(conn: Connection, host: Host, book: Playbook | None, unit: str, say: Callable[[str], None],
            store: ReleaseStore | None = None) -> list[str]:
    """Close what dead runs left (see the module's doc). Returns one line per thing done; [] when clean. `store`:
    the host's releases, read and written through its session (default ReleaseStore(conn, host))."""
    store = store if store is not None else ReleaseStore(conn, host)
    dropped = drop_temp_files(store.session, unit)
    links = [f"removed a new `current` link a dead run left: {p}" for p in dropped if CURRENT_TEMP in p]
    repaired = patches.undo_interrupted_runs(conn, host) + [
        f"removed a temp file left half-written: {p}" for p in dropped if CURRENT_TEMP not in p]
    notes = links + repaired + finish_commits(store)
    found = find(store)
    notes += close_interrupted(store, found)
    marked = _rollback_marked(store.session)
    if marked:
        notes.append(f"a rollback was interrupted ({marked})")
    for note in notes:
        say(f"recovering: {note}")
    if not repaired and not marked and not any(it.touched_host for it in found):
        return notes
    current = store.current()
    if book is None:
        raise FleetError(f"{host.name}: a dead run left the host to be put back ({'; '.join(notes)[:300]}), which "
                         "needs the release's playbook: run `inv deploy` or `inv rollback` with --playbook first")
    if current is None:  # the stop said with its budget, and where it stands while it goes on
        restore.stop_server(conn, host, unit, book.budgets.stop, say)
        problem = restore.set_patches(conn, host, [], say)
        if problem:
            raise FleetError(f"{host.name}: after an interrupted deploy, reverting fleet's patches failed: {problem}")
        notes.append("no earlier release: unit stopped and fleet's patches reverted")
    elif where := node_of(current):  # a node of a multi-node server cannot start (or be verified) alone
        say(f"recovering: putting back the files of node release {current.id}; it starts with its peers")
        failed = restore.put_back(conn, host, store, current, book, say)
        if failed:
            raise FleetError(f"{host.name}: after an interrupted deploy, putting back release {current.id} failed: "
                             f"{failed.outcome} {failed.evidence}")
        notes.append(f"files of release {current.id} ({where}) put back, "
                     "unit left stopped: deploy its playbook on all its nodes to start it")
    else:
        say(f"recovering: putting back the last known-good release {current.id}")
        attempt = restore.restore(conn, host, store, current, book, say)
        if attempt.outcome != Outcome.READY:
            raise FleetError(f"{host.name}: after an interrupted deploy, restoring release {current.id} failed: "
                             f"{attempt.outcome} {attempt.evidence}")
        notes.append(f"back on release {current.id} ({current.rung}), serving")
    if marked:
        remove_file(store.session, ROLLBACK_MARK)
    say(f"recovering: {notes[-1]}")
    return notes


def needs_playbook(conn: Connection, host: Host) -> list[str]:
    """What a dead run left that only a put-back with the release's playbook can close, read only in one round
    trip (under the lock): releases in progress, patch runs half done, a rollback's mark. [] on a clean host."""
    return leftovers.dead_run_marks(conn, host, ROOT, BACKUP_ROOT, ROLLBACK_MARK)


def _rollback_marked(s: HostFiles) -> str | None:
    """What a dead rollback's mark says (to, from), or None when there is none."""
    out = read_quiet(s, ROLLBACK_MARK).strip()
    if not out:
        return None
    try:
        mark = json.loads(out)
    except ValueError:
        return "its mark is unreadable"
    if not isinstance(mark, dict):
        return "its mark is unreadable"
    return f"to {str(mark.get('to'))[:40]} from {str(mark.get('from'))[:40]}"


def drop_temp_files(s: HostFiles, unit: str, root: str = ROOT) -> list[str]:
    """write_atomic's temp files that a killed writer left next to the unit and env files, and mark_current's new
    link to a release that a run killed (or a failed rename) left beside `current`: the paths removed (one round
    trip; it runs under the host lock, so no live run's link is among them)."""
    pairs = [("/etc/systemd/system", f".{unit}.service.fleet-"), ("/etc/fleet", f".{unit}.env.fleet-"),
             (root, CURRENT_TEMP)]
    return leftovers.drop_temps(s, pairs)


# ---------------------------------------------------------------------- what `inv status` shows (read only)

def parse_probe(text: str) -> str | None:
    """status.sh's leftovers section -> one line saying what a dead run left and what the next deploy does, or what a
    live one is doing; None when the host is clean."""
    owner, releases, runs = _leftovers(text)
    live = owner is not None and not hostlock.dead_owner(owner)
    notes = []
    if owner is not None:
        dead = hostlock.dead_owner(owner)
        notes.append(f"lock left by a dead run ({dead}): the next deploy recovers it" if dead else
                     f"locked: {hostlock.describe(owner)}")
    for rid, step in releases:
        notes.append(f"deploy {rid} in progress (at step {step})" if live else
                     f"release {rid} was interrupted after step {step}: the next deploy rolls back to the "
                     f"last known-good release, then deploys")
    for run in runs:
        notes.append(f"patch run {run} in progress" if live else
                     f"patch run {run} was interrupted half-way: the next deploy puts its files back")
    return "; ".join(notes) or None


def left_by_dead_run(text: str) -> bool:
    """Whether status.sh's leftovers section shows what a run that is gone left (a lock whose owner is provably dead,
    a release or patch run no live run holds): `inv status` is not clean there (exit 1), as the next deploy has to
    put it back first. A live run's lock is a deploy under way, not a leftover."""
    owner, releases, runs = _leftovers(text)
    if owner is not None and not hostlock.dead_owner(owner):
        return False
    return owner is not None or bool(releases or runs)


def _leftovers(text: str) -> tuple[hostlock.LockOwner | None, list[tuple[str, str]], list[str]]:
    owner: hostlock.LockOwner | None = None
    releases: list[tuple[str, str]] = []
    runs: list[str] = []
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "lock" and rest.strip():
            owner = hostlock.LockOwner.from_json(rest) or hostlock.LockOwner()
        elif kind == "release" and rest.strip():
            rid, _, event = rest.partition(" ")
            try:
                step = json.loads(event).get("step", "none") if event.strip() else "none"
            except ValueError:
                step = "?"
            releases.append((rid, step))
        elif kind == "patch-run" and rest.strip():
            runs.append(rest.strip())
    return owner, releases, runs
