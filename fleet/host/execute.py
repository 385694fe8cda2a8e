"""`inv exec`: one shell command on many hosts in parallel, over fleet's own connections."""

from __future__ import annotations

import math
from collections.abc import Sequence

from fleet import parallel
from fleet.errors import InputError
from fleet.inventory import Host
from fleet.parallel import HostOutcome
from fleet.ssh import remote
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import CommandResult

DEFAULT_TIMEOUT_S = 120.0  # what `inv exec` waits for one host's command when no --timeout is given
MAX_TIMEOUT_S = 86400.0  # a deadline, not a way to wait forever (and what timers can hold)


def parse_timeout(text: str | float | None) -> float:
    """--timeout SECONDS: a positive, finite number; none given is DEFAULT_TIMEOUT_S."""
    if text is None or not str(text).strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--timeout {str(text)[:40]!r}: not a number of seconds") from None
    if not value > 0 or not math.isfinite(value):
        raise InputError(f"--timeout {str(text)[:40]!r}: must be a positive number of seconds")
    if value > MAX_TIMEOUT_S:
        raise InputError(f"--timeout {str(text)[:40]!r}: at most {MAX_TIMEOUT_S:g} seconds (a day)")
    return value


def run_everywhere(hosts: Sequence[Host], command: str, opts: ConnectOptions,
                   timeout: float = DEFAULT_TIMEOUT_S) -> list[HostOutcome[CommandResult]]:
    """The command on every host, each under `timeout` (stdin to exit status) and remote.MAX_OUTPUT."""
    def one(host: Host) -> CommandResult:
        conn = open_connection(host, opts)
        try:
            return remote.run(conn, host, command, timeout=timeout)
        finally:
            conn.close()

    return parallel.run_all(hosts, one)
