"""`inv patch` across hosts: check, apply or revert patch sets on each host in parallel; a change is made
under the host lock together with its release record (so `inv rollback` undoes it), optionally followed
by an audit of the gates that still exclude the host's SM."""

from __future__ import annotations

from fleet import parallel
from fleet.deploy.restore import in_own_venv, record_patch_release
from fleet.errors import FleetError
from fleet.host import lock as hostlock
from fleet.host import venvs
from fleet.host.releases import ReleaseStore
from fleet.inventory import Host
from fleet.patches import audit as archgate
from fleet.patches.engine import HostResult, apply_host, check_host, revert_host
from fleet.patches.sets import PatchSet
from fleet.ssh.connect import ConnectOptions, open_connection

ACTIONS = ("check", "apply", "revert")


def run_hosts(hosts: list[Host], sets: list[PatchSet], action: str, opts: ConnectOptions | None = None,
              allow_prebuilt: bool = False, audit: bool = False) -> list[HostResult]:
    """check | apply | revert on every host in parallel; a host that fails gets a result with its error.
    With audit, each result also carries the arch gates that still exclude the host's SM afterwards."""
    if action not in ACTIONS:
        raise ValueError(f"patch action {action!r}: one of {', '.join(ACTIONS)}")

    def one(host: Host) -> HostResult:
        conn = open_connection(host, opts)
        try:
            if action == "check":  # the venv the current release serves from (packages:), not the inventory's
                host = venvs.serving(conn, host)
                result = check_host(conn, host, sets, allow_prebuilt)
            else:
                # One lock over the change and its release record, so no deploy slips in between.
                with hostlock.held(conn, host, f"patch {'--revert ' if action == 'revert' else ''}"
                                               + " ".join(s.name for s in sets)):
                    # read before any change: a `current` that cannot be read refuses with the host untouched
                    current = ReleaseStore(conn, host).current()
                    if current is not None:  # its patch sets go into the venv it serves from
                        host = in_own_venv(host, current)
                    result = (apply_host(conn, host, sets, allow_prebuilt, lock=False) if action == "apply"
                              else revert_host(conn, host, sets, lock=False))
                    if result.ok and result.written:
                        result.release = record_patch_release(conn, host, current, action, [s.name for s in sets])
            if audit:
                try:
                    result.audit = archgate.audit_host(conn, host, sets=sets)
                except FleetError as exc:
                    result.audit_error = str(exc)
            return result
        finally:
            conn.close()

    out = []
    for o in parallel.run_all(hosts, one):
        out.append(o.value if o.ok and o.value is not None else HostResult(o.host.name, action, False, error=o.error))
    return out
