"""`inv rollback --dry-run` on one host: what the rollback would do, read without the lock and changing nothing.

The release it goes to (fleet.deploy.rollback.target, the same choice), the diff of the unit and env file from what
is installed to that release's copies, its patch sets' state, the packages it ran that the venv no longer has,
whether its unit would be enabled, and what an earlier run left in progress (taken over first)."""

from __future__ import annotations

import difflib

from fleet.deploy import recovery, restore
from fleet.deploy.boot import ENABLED
from fleet.deploy.results import DeployResult
from fleet.deploy.rollback import recorded_playbook, refuse_node, refuse_owner, target
from fleet.errors import FleetError
from fleet.host import probe_run, venvs
from fleet.host.facts import stack_versions
from fleet.host.releases import ReleaseStore, stack_drift, versions_of
from fleet.host.service import read_file
from fleet.host.session import HostSession
from fleet.inventory import Host
from fleet.logs.redact import env_text as redact_env
from fleet.outcomes import DeployStatus
from fleet.patches import engine as patches
from fleet.patches import sets as patchsets
from fleet.playbook import Playbook, secret_names
from fleet.ssh.connect import ConnectOptions


def dry_run(host: Host, book: Playbook | None, opts: ConnectOptions, to: str | None,
            before_stop: str | None = None) -> DeployResult:
    """What `rollback(host, book, opts, to)` would do, as a DRY_RUN result (`unchanged`: the host already serves
    that release from its files); a refusal raises as the rollback's own does. `before_stop`: what happens
    before the server stops (a replica taken out of its router), said in its place."""
    s = HostSession.open(host, opts)
    try:
        return _plan(s, book, to, before_stop)
    finally:
        s.close()


def _plan(s: HostSession, book: Playbook | None, to: str | None, before_stop: str | None) -> DeployResult:
    conn, host = s.conn, s.host
    store = ReleaseStore(conn, host)
    current = store.current()
    refuse_node(host, current, book)
    book = book or recorded_playbook(store, host, to)
    back = target(store, host, to)
    refuse_node(host, back, book)
    if back.playbook != book.name:
        raise FleetError(f"{host.name}: release {back.id} served playbook {back.playbook}, not {book.name}: "
                         f"roll back with --playbook {back.playbook}, or leave --playbook out")
    lines = [f"{it.describe()}: the rollback first takes over what its run left\n" for it in recovery.find(store)]
    copies = restore.verified_copies(store, back)
    if isinstance(copies, str):
        raise FleetError(f"{host.name}: {copies}; the rollback would refuse; nothing was changed")
    refuse_owner(conn, host, store, back)
    names = secret_names(book)
    diffs: list[str] = []
    for path, data in copies.items():
        old = read_file(conn, host, path)
        old_text = redact_env(old, names) if old is not None else ""
        diffs += difflib.unified_diff(old_text.splitlines(True), redact_env(data, names).splitlines(True),
                                      fromfile=f"{path} (installed)", tofile=f"{path} (release {back.id})")
    own = venvs.in_unit_venv(host, back, copies)
    wanted = back.patch_sets()
    for sp in patches.check_host(conn, own, patchsets.load_sets(wanted)).sets if wanted else []:
        diffs.append(f"patch set {sp.name}: {sp.state}" + (f" ({sp.reason})" if sp.reason else "") + "\n")
    others = [n for n in patchsets.available() if n not in wanted]
    if others:
        diffs.append(f"patch sets reverted where applied: {', '.join(others)}\n")
    unit = restore.unit_of(back)
    state = s.unit_file_states([unit])[unit]
    same = current is not None and current.id == back.id and not diffs
    steps = [f"rollback from {current.id if current else 'no current release'}"
             + (f" ({current.rung})" if current and current.rung else "")
             + f" to {back.id} ({back.rung}), judged with playbook {book.name}\n"]
    if before_stop:
        steps.append(f"{before_stop}\n")
    steps.append(f"{unit} stopped, the files below put back byte for byte, started and checked (/health and the "
                 "known answer)" + (f"; if it does not come up, release {current.id} is put back" if current and
                                    current.id != back.id else "") + "\n")
    if state != ENABLED:
        steps.append(f"{unit} enabled (it is {state or 'not enabled'}), so a reboot starts release {back.id}\n")
    drift = stack_drift(versions_of(back.facts), stack_versions(probe_run.probe_on(conn, own)))
    notes = [f"release {back.id} ran {', '.join(drift)} now in the venv: a rollback puts back the unit, env and "
             "patch sets, not packages (install the release's versions by hand)"] if drift else []
    said = "".join(lines + steps + (diffs or ["(no differences in the files)\n"]))
    return DeployResult(host.name, DeployStatus.DRY_RUN, release=back.id, config=back.config, notes=notes,
                        unchanged=same, diff=said)
