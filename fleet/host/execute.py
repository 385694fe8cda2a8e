"""`inv exec`: one shell command on many hosts in parallel, over fleet's own connections."""

from __future__ import annotations

from collections.abc import Sequence

from fleet import parallel
from fleet.inventory import Host
from fleet.parallel import Outcome
from fleet.ssh import remote
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import CommandResult


def run_everywhere(hosts: Sequence[Host], command: str, opts: ConnectOptions) -> list[Outcome[CommandResult]]:
    def one(host: Host) -> CommandResult:
        conn = open_connection(host, opts)
        try:
            return remote.run(conn, host, command)
        finally:
            conn.close()

    return parallel.run_all(hosts, one)
