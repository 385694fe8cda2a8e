"""One command on a sandbox host over a fresh fleet connection (what the integration tests share)."""

from __future__ import annotations

from fleet.connect import ConnectOptions, open_connection
from fleet.inventory import Host
from fleet.remote import CommandResult, run


def sh(host: Host, command: str, opts: ConnectOptions | None = None) -> CommandResult:
    conn = open_connection(host, opts)
    try:
        return run(conn, host, command)
    finally:
        conn.close()
