"""Running commands on a connected host: quoting, become, and results as plain data."""

from __future__ import annotations

from dataclasses import dataclass

from fabric import Connection

from fleet.connect import wrap
from fleet.inventory import Host


@dataclass(frozen=True)
class CommandResult:
    command: str
    exited: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exited == 0


def run(conn: Connection, host: Host, command: str, timeout: float | None = None) -> CommandResult:
    """One exec channel; never raises on a non-zero exit (the caller decides what it means)."""
    res = conn.run(wrap(host, command), hide=True, warn=True, in_stream=False, timeout=timeout)
    return CommandResult(command=command, exited=res.exited, stdout=res.stdout, stderr=res.stderr)
