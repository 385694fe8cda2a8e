"""Before a pinned deploy or tune changes any host: the wheels each host's Python and platform needs for the
playbook's `packages:`, in the controller's wheelhouse, downloaded where it lacks them
(fleet.upstream.resolver.fill), and the playbook's lock enforced or, for a pin set's first deploy, written
(fleet.upstream.lockfile). One read-only round trip per host (its python3 and platform); a host that
cannot be reached is left to its own deploy to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fleet import parallel
from fleet.host import venvs
from fleet.inventory import Host
from fleet.progress import Progress
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.upstream import lockfile, resolver, wheelhouse


def target_of(host: Host, opts: ConnectOptions) -> wheelhouse.Target:
    conn = open_connection(host, opts)
    try:
        return venvs.host_target(conn, host)
    finally:
        conn.close()


def prepare(hosts: Sequence[Host], pins: dict[str, str], opts: ConnectOptions, say: Progress,
            lock: Path | None = None) -> list[str]:
    """Fill the wheelhouse for every kind of host among `hosts`, then hold it to the lock (each wheel's sha256 the
    lock's; a kind of host the lock lacks for these pins is resolved and locked); the wheels downloaded.
    MissingWheel or LockError (one line) when one cannot be had or is not the locked one: nothing on any host
    was changed."""
    outcomes = parallel.run_all(hosts, lambda h: target_of(h, opts))
    targets = sorted({o.value for o in outcomes if o.ok and o.value is not None}, key=str)
    fetched: list[str] = []
    for target in targets:
        if lock is None or lockfile.find(lockfile.load(lock), pins, target) is None:
            fetched += resolver.fill(pins, target, say=say)  # locked: the lock says which files, no resolve
        if lock is not None:
            lockfile.ensure(lock, pins, target, say=say)
    return fetched
