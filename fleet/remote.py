"""Running commands on a connected host: quoting, become, and results as plain data."""

from __future__ import annotations

from dataclasses import dataclass

from fabric import Connection
from paramiko import SSHException

from fleet import keepalive
from fleet.connect import wrap
from fleet.errors import ConnectError
from fleet.inventory import Host


class ConnectionLost(ConnectError):
    """The link died under a command (the keepalive watchdog closed it): the command's outcome is unknown."""


def lost_link(conn: Connection, host: Host, where: str, exc: BaseException | None = None) -> None:
    """Raise ConnectionLost when the keepalive watchdog closed this connection, or `exc` came with the link
    dropping under us (e.g. the host died: Fabric's silent reconnect then fails); else nothing."""
    why = keepalive.lost(conn.transport)
    if why is None and exc is not None and not (conn.transport and conn.transport.is_active()):
        why = f"the link dropped ({type(exc).__name__}: {str(exc)[:160]})"
    if why:
        raise ConnectionLost(f"{host.name}: connection lost {where}: {why}") from None


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
    lost_link(conn, host, f"before `{command[:60]}`")  # never let Fabric silently reconnect a dead link
    try:
        res = conn.run(wrap(host, command), hide=True, warn=True, in_stream=False, timeout=timeout)
    except (EOFError, OSError, SSHException) as exc:
        lost_link(conn, host, f"during `{command[:60]}`", exc)
        raise
    lost_link(conn, host, f"during `{command[:60]}`")
    return CommandResult(command=command, exited=res.exited, stdout=res.stdout, stderr=res.stderr)
