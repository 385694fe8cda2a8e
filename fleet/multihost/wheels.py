"""Before a pinned deploy or tune changes any host: the wheels each host's Python and platform needs for the
playbook's `packages:`, in the controller's wheelhouse, downloaded where it lacks them
(fleet.upstream.wheelhouse.fill). One read-only round trip per host (its python3 and platform); a host that
cannot be reached is left to its own deploy to report.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet import parallel
from fleet.host import venvs
from fleet.inventory import Host
from fleet.progress import Progress
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.upstream import wheelhouse


def target_of(host: Host, opts: ConnectOptions) -> wheelhouse.Target:
    conn = open_connection(host, opts)
    try:
        return venvs.host_target(conn, host)
    finally:
        conn.close()


def prepare(hosts: Sequence[Host], pins: dict[str, str], opts: ConnectOptions, say: Progress) -> list[str]:
    """Fill the wheelhouse for every kind of host among `hosts`; the wheels downloaded. MissingWheel (one line)
    when one cannot be had: nothing on any host was changed."""
    outcomes = parallel.run_all(hosts, lambda h: target_of(h, opts))
    targets = sorted({o.value for o in outcomes if o.ok and o.value is not None}, key=str)
    fetched: list[str] = []
    for target in targets:
        fetched += wheelhouse.fill(pins, target, say=say)
    return fetched
