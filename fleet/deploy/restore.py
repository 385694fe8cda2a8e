"""A release's files onto a host: install a planned unit and env file (backed up into the release first),
set patch sets, put a recorded release back byte for byte, restart it and wait for it to serve, fall back
when nothing served. Shared by deploy, rollback, multi-node, tune and recovery."""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fabric import Connection

from fleet.deploy.fallback import attempted
from fleet.deploy.health import verify
from fleet.deploy.preflight import unit_owner_problem
from fleet.deploy.results import Attempt
from fleet.host import kcache, venvs
from fleet.host.found_files import BeforeFleet
from fleet.host.releases import Release, ReleaseStore, new_id, now, recorded_flashinfer, recorded_sglang
from fleet.host.render import LAUNCHER, env_file, environment_files, launcher_text, unit_environment, unit_file
from fleet.host.service import (
    ServiceError,
    daemon_reload,
    drop_ins,
    drop_kept,
    make_folders,
    put_back_kept,
    read_file,
    restart_unit,
    sha256,
    shown,
    stop_and_empty_gpus,
    verify_unit_text,
    write_atomic,
)
from fleet.host.session import ConnectionLost, HostSession
from fleet.inventory import Host
from fleet.logs import journal
from fleet.outcomes import Outcome, ReleaseStatus, ServerVerdict
from fleet.patches import engine as patches
from fleet.patches import sets as patchsets
from fleet.playbook import Playbook
from fleet.progress import Progress, ticking


class Rendered(Protocol):
    """A unit and env file rendered for a host (a rung's Planned, the router's RouterPlan), with the API key
    and its file when the unit has one."""

    unit_text: str
    env_text: str
    key: str | None
    key_path: str | None


class InstallError(ServiceError):
    """The unit or env file could not be written: the attempt is INSTALL_FAILED."""


def install(conn: Connection, host: Host, store: ReleaseStore, release: Release, planned: Rendered,
            unit_path: str, env_path: str) -> None:
    """Back up what is installed into the release, then write unit and env atomically and reload systemd.
    With an API key, also fleet's launcher (recorded like the unit) and the key's file (0600, root's; never
    copied into the release store: a rollback keeps the key the host has)."""
    files = [(unit_path, planned.unit_text, 0o644), (env_path, planned.env_text, 0o600)]
    if planned.key is not None:
        files.append((LAUNCHER, launcher_text(), 0o755))
    try:
        folders = dict.fromkeys(posixpath.dirname(p) for p in (env_path, planned.key_path) if p)
        make_folders(conn, host, list(folders), [posixpath.dirname(LAUNCHER)] if planned.key else [])
        for path, text, mode in files:
            old = read_file(conn, host, path)
            BeforeFleet.direct(conn, host).note(path, old)
            if old is not None and f"before:{path}" not in release.files:
                store.keep_file(release, "before" + path, old, 0o600)
                release.files[f"before:{path}"] = {"sha256": sha256(old)}
            data = text.encode()
            write_atomic(conn, host, path, data, mode, keep=True)  # what served stays, for a put-back by rename
            store.keep_file(release, path, data, mode)
            release.files[path] = {"sha256": sha256(data), "mode": oct(mode)}
        if planned.key is not None and planned.key_path:
            BeforeFleet.direct(conn, host).note(planned.key_path, read_file(conn, host, planned.key_path))
            write_atomic(conn, host, planned.key_path, planned.key.encode(), 0o600)
        daemon_reload(conn, host)
        store.save(release)
    except ServiceError as exc:
        raise InstallError(str(exc)) from None


def key_installed(conn: Connection, host: Host, planned: Rendered) -> bool:
    """Whether the host's key file already holds the planned key (True without a key)."""
    if planned.key is None or not planned.key_path:
        return True
    return read_file(conn, host, planned.key_path) == planned.key.encode()


def unit_problem(conn: Connection, host: Host, planned: Rendered, unit_path: str) -> str | None:
    """Why the host's systemd would refuse the rendered unit (`systemd-analyze verify` of its text at a
    temporary path), or would not run it as rendered (a drop-in fleet did not write overrides it): asked before
    anything on the host is stopped or written, by every path that installs."""
    complaint = verify_unit_text(conn, host, planned.unit_text, unit_path)
    if complaint:
        return f"systemd-analyze verify rejects the unit: {complaint.splitlines()[0]}"
    try:
        foreign = drop_ins(conn, host, unit_path)
    except ServiceError as e:
        return f"fleet cannot read the drop-ins systemd would apply over the unit: {e}"
    if foreign:
        return (f"drop-ins fleet did not write override the unit: {shown(foreign)} (systemd applies them over "
                "the unit fleet renders, so what would run is not what fleet checked); move their settings into the "
                "playbook, delete them and run `systemctl daemon-reload`")
    return None


def patched_files(conn: Connection, host: Host) -> dict[str, str]:
    """sha256 of every file a known patch set manages, as it stands now: what a release records."""
    state = patches.read_state(conn, host, patchsets.load_sets(patchsets.available()))
    return {f.path: f.sha256 for f in state.files.values() if f.path and f.sha256}


def set_patches(conn: Connection, host: Host, wanted: list[str], say: Progress) -> str | None:
    """Apply the rung's patch sets and revert every other known set (a patched gate can enable fusion)."""
    others = [s for s in patchsets.available() if s not in wanted]
    for verb, names, step in (("reverted", others, patches.revert_host), ("applied", wanted, patches.apply_host)):
        if not names:
            continue
        res = step(conn, host, patchsets.load_sets(names))
        if res.written:
            say(f"{verb} patch sets {', '.join(names)} ({len(res.written)} files)")
        if not res.ok:
            return res.error
    return None


def unit_of(release: Release) -> str:
    """The systemd unit a release installed."""
    return Path(next(p for p in release.files if p.endswith(".service") and not p.startswith("before:"))).stem


def restart(conn: Connection, host: Host, unit: str) -> None:
    restart_unit(conn, host, unit)


def start_and_verify(conn: Connection, host: Host, unit: str, book: Playbook, say: Progress,
                     sglang: str | None = None, flashinfer: str | None = None) -> ServerVerdict:
    """Restart the unit, follow its journal to READY (or not; with the release's `sglang` and `flashinfer`,
    classified by their sites), then the health check."""
    cursor = journal.cursor(conn, host)
    # never on caches no start served with (removed as the unit's user)
    restart_unit(conn, host, unit, first=kcache.drop_unproven(user=book.serve.user))
    outcome, evidence = journal.watch(conn, host, unit, cursor, book.budgets, say, sglang=sglang,
                                      flashinfer=flashinfer)
    if outcome == Outcome.READY:
        outcome, evidence = verify(conn, host, book, say)
    return outcome, evidence


def restore(conn: Connection, host: Host, store: ReleaseStore, release: Release, book: Playbook,
            say: Progress) -> Attempt:
    """Put a release's unit, env and patch sets back byte for byte, restart, and wait for READY + health."""
    start = time.monotonic()
    refused = owner_problem(conn, host, store, release)
    if refused:  # asked before anything stops or changes: a put-back never starts a unit on another user's code
        return Attempt(release.rung or "-", Outcome.PREFLIGHT, refused, 0)
    failed = put_back(conn, host, store, release, book, say)
    if failed:
        return failed
    outcome, evidence = start_and_verify(conn, host, unit_of(release), book, say, recorded_sglang(release.facts),
                                         recorded_flashinfer(release.facts))
    return Attempt(release.rung or "-", outcome, evidence, time.monotonic() - start)


def owner_problem(conn: Connection, host: Host, store: ReleaseStore, release: Release) -> str | None:
    """Why the release's unit must not start now (fleet.deploy.preflight.unit_owner_problem: its venv's owner may
    have changed since it was made), None where it may: the unit as systemd would run it, with the drop-ins on the
    host now. A release whose copies are damaged is left to put_back, which refuses it."""
    copies = verified_copies(store, release)
    if isinstance(copies, str):
        return None
    unit_path = next((path for path in copies if path.endswith(".service")), None)
    if unit_path is None:
        return None
    env = next((data for path, data in copies.items() if path.endswith(".env")), b"").decode("utf-8", "replace")
    # systemd starts it with every drop-in on the host over it (the distribution's and an admin's for every
    # service too), whose User=, ExecStart= and Environment= win; one fleet cannot read is not judged: refused
    over = ""
    try:
        over_paths = drop_ins(conn, host, unit_path, every=True)
    except ServiceError as e:
        return f"fleet cannot read the drop-ins systemd would apply over the unit, so the owner rule cannot judge: {e}"
    for path in over_paths:
        data = read_file(conn, host, path) if path.startswith("/") else None
        if data is None:
            return (f"the drop-in {shown([path])} applies over the unit and fleet could not read it, so the owner rule "
                    "cannot judge what would run; delete it or make it a file, and run `systemctl daemon-reload`")
        over += "\n" + data.decode("utf-8", "replace")
    for path in environment_files(over):
        env += "\n" + (read_file(conn, host, path) or b"").decode("utf-8", "replace")
    unit = copies[unit_path].decode("utf-8", "replace") + over
    return unit_owner_problem(conn, host, unit, unit_environment(unit) + env)


def installed_problem(s: HostSession, unit: str) -> str | None:
    """Why the unit as installed now must not be started again, as the owner rule says
    (fleet.deploy.preflight.unit_owner_problem: its venv's owner may have changed since it started), None where it
    may: what a run that stopped it, a recover or a put-back after a failure start again as it was. The unit as
    systemd runs it (`systemctl cat`: its file wherever it is and its drop-ins, whose User=, ExecStart= and
    Environment= win), with its Environment= and each EnvironmentFile= it names; fleet's files where systemd says
    nothing."""
    try:
        text = s.unit_text(unit)
    except ServiceError as e:  # its drop-ins unseen: not judged, so not started
        return f"fleet cannot read the unit as systemd would run it: {e}"
    if text is None:
        raw = s.read(unit_file(unit))
        if raw is None:
            return None
        text = f"EnvironmentFile={env_file(unit)}\n" + raw.decode("utf-8", "replace")
    env = unit_environment(text)
    for path in environment_files(text):
        env += (s.read(path) or b"").decode("utf-8", "replace") + "\n"  # an env file wins over Environment=
    return unit_owner_problem(s.conn, s.host, text, env)


def mode_of(release: Release, path: str) -> int:
    return int(release.files[path].get("mode", "0o600"), 8)


def verified_copies(store: ReleaseStore, release: Release) -> dict[str, bytes] | str:
    """The release's own copies of the files it installed, each checked against its recorded sha256; what is
    wrong when one is missing or damaged."""
    copies = {}
    for path, meta in release.files.items():
        if path.startswith("before:"):
            continue
        data = store.file(release, path)
        if data is None or sha256(data) != meta["sha256"]:
            return f"release {release.id} copy of {path} is missing or damaged (sha256 mismatch)"
        copies[path] = data
    return copies


def put_back(conn: Connection, host: Host, store: ReleaseStore, release: Release, book: Playbook,
             say: Progress) -> Attempt | None:
    """A release's patch sets, unit and env back byte for byte with the unit stopped (not started again);
    the failed Attempt when that cannot be done."""
    start = time.monotonic()

    def refused(why: str) -> Attempt:
        return Attempt(release.rung or "-", Outcome.PREFLIGHT, why, time.monotonic() - start)

    copies = verified_copies(store, release)
    if isinstance(copies, str):
        return refused(copies)
    host = venvs.in_unit_venv(host, release, copies)  # its patch sets are in the venv it ran from
    # Patch sets first: a refusal (a hand-edited file) must leave the running server alone.
    problem = set_patches(conn, host, release.patch_sets(), say)
    if problem:
        return refused(problem)
    expected = release.patched_files()
    current = patched_files(conn, host) if expected else {}
    for path, sha in expected.items():
        if current.get(path) != sha:
            return refused(f"{path} is not as release {release.id} left it (sha256 {str(current.get(path))[:12]} "
                           f"!= {sha[:12]}) after re-applying its patch sets")
    try:
        stop_server(conn, host, unit_of(release), book.budgets.stop, say)
    except ConnectionLost:
        raise
    except ServiceError as exc:  # e.g. nvidia-smi failing once: the files still go back, the start then tells
        say(f"stopping before putting back release {release.id}: {exc}; going on")
    problem = put_files(conn, host, release, copies)
    if problem:
        return refused(problem)
    daemon_reload(conn, host)
    return None


def stop_server(conn: Connection, host: Host, unit: str, budget: float, say: Progress) -> None:
    """The unit stopped and its GPUs emptied, said first and, while it lasts, where it stands against its budget (a
    real server's stop takes up to its TimeoutStopSec, then the GPUs' release: a rollback or a fall-back was silent
    through it)."""
    say(f"stopping {unit} and emptying the GPUs (budget {budget:.0f}s)")
    with ticking(say, "stop", budget):
        stop_and_empty_gpus(conn, host, unit, budget, say)


def put_files(conn: Connection, host: Host, release: Release, copies: dict[str, bytes]) -> str | None:
    """`release`'s files (`copies`, from verified_copies) back at their paths: each skipped when it already is as
    the release has it, else renamed back from the copy a write kept beside it (no free space needed), else
    written (what stood there kept in turn). What did not verify, or None; a failed write raises."""
    for path, data in copies.items():
        want = release.files[path]["sha256"]
        if sha256(read_file(conn, host, path) or b"") == want:
            continue  # already as the release has it: a write that is not needed cannot fail on a full disk
        if not put_back_kept(conn, host, path, want):  # by rename where a run kept it: no free space needed
            write_atomic(conn, host, path, data, mode_of(release, path), keep=True)
        if sha256(read_file(conn, host, path) or b"") != want:
            return f"{path} did not verify after writing"
    return None


def end_run(conn: Connection, host: Host, unit: str) -> str | None:
    """A run has ended (what serves is settled): the copies of the unit, env and launcher files its writes kept
    are dropped. Its error, never raised (the next run's recovery drops them too); a lost link still raises."""
    return attempted(lambda: drop_kept(conn, host, [unit_file(unit), env_file(unit), LAUNCHER]))


@dataclass
class ServerSteps:
    """The fall-back's steps for a server on one host (fleet.deploy.fallback): stop it and empty its GPUs,
    put a release back and check it serves, close `release` (the new one) as failed, point `current` back."""

    conn: Connection
    host: Host
    store: ReleaseStore
    release: Release
    book: Playbook
    unit: str
    say: Progress
    ends_as: ReleaseStatus = ReleaseStatus.FAILED  # how the new release is closed (interrupted: a Ctrl-C ended it)

    @property
    def label(self) -> str:
        return self.host.name

    @property
    def new_release(self) -> str:
        return self.release.id

    def stop(self) -> None:
        stop_server(self.conn, self.host, self.unit, self.book.budgets.stop, self.say)

    def put_back(self, previous: Release) -> ServerVerdict:
        rolled = restore(self.conn, self.host, self.store, previous, self.book, self.say)
        return rolled.outcome, rolled.evidence

    def close_failed(self) -> None:
        close_failed(self.store, self.release, self.say, self.ends_as)

    def point_back(self, previous: Release) -> str | None:
        return self.store.point_back(previous)


def close_failed(store: ReleaseStore, release: Release, say: Progress,
                 status: ReleaseStatus = ReleaseStatus.FAILED) -> None:
    """The release closed as failed (or `status`: interrupted); a save that fails (a full disk) is said, and left
    to recovery."""
    release.ended(status)
    release.settled()
    problem = attempted(lambda: store.save(release))
    if problem:  # e.g. a full /var/lib/fleet: the next run's recovery marks it interrupted instead
        say(f"could not close release {release.id} as {status}: {problem}")


def record_patch_release(conn: Connection, host: Host, current: Release | None, action: str,
                         sets: list[str]) -> str | None:
    """A standalone `inv patch` is a release of its own, so rollback covers it: the current release's unit
    and env as they are (`current`, read before the patch changed anything), with the patch sets as they now
    stand. None when nothing was deployed yet."""
    store = ReleaseStore(conn, host)
    if current is None:
        return None
    applied = current.patch_sets()
    applied = [*applied, *(s for s in sets if s not in applied)] if action == "apply" else \
        [s for s in applied if s not in sets]
    release = Release(id=new_id(), host=host.name, playbook=current.playbook,
                      playbook_sha256=f"patched:{current.playbook_sha256}", created=now(), status=ReleaseStatus.OK,
                      rung=current.rung, config={**current.config, "patches": applied}, facts=current.facts,
                      finished=now())
    store.open(release)
    for path, meta in current.files.items():
        data = None if path.startswith("before:") else store.file(current, path)
        if data is not None:
            store.keep_file(release, path, data, int(meta.get("mode", "0o600"), 8))
            release.files[path] = meta.copy()
    release.patched(applied, patched_files(conn, host))
    release.tried([{"rung": "inv patch", "outcome": action, "evidence": " ".join(sets), "seconds": 0}])
    store.save(release)
    store.event(release, {"step": "patch", "action": action, "sets": sets, "after": current.id})
    store.mark_current(release)
    return release.id
