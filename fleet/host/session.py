"""One host, one connection: the object every operation on a host is handed.

A HostSession binds the SSH connection to the inventory host it reaches (its become, its venv) and answers
the verbs operations need: run a command, read a file, write one atomically, ask systemd about a unit. The
operations above never hold a connection and a host side by side; shell text stays in fleet.host and
fleet.ssh, behind these verbs. Every command verb goes through `run`, so a fake session (tests) that answers
`run` from a script answers them all.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from fabric import Connection

from fleet.host import lock as hostlock
from fleet.host import probe_run, service
from fleet.host.facts import HostFacts
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import CommandResult, lost_link, run

RUNNING = frozenset({"active", "activating", "reloading"})  # running, or trying to (a Restart= loop between tries)


def one_line(text: str, limit: int = 200) -> str:
    """What a host sent, fit for an operator's one line: its first non-empty line, printable, at most `limit`."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return "".join(c if c.isprintable() else "?" for c in first)[:limit]


@dataclass
class HostSession:
    """The connection to `host`, and the verbs every operation on it uses."""

    conn: Connection
    host: Host

    @classmethod
    def open(cls, host: Host, opts: ConnectOptions | None) -> HostSession:
        return cls(open_connection(host, opts), host)

    @property
    def name(self) -> str:
        return self.host.name

    def close(self) -> None:
        self.conn.close()

    def as_host(self, host: Host) -> HostSession:
        """The same connection, for the host as a release sees it (its own venv, say)."""
        return replace(self, host=host)

    # ------------------------------------------------------------------ commands
    def run(self, command: str, timeout: float = 120.0) -> CommandResult:
        return run(self.conn, self.host, command, timeout=timeout)

    def sh(self, command: str, timeout: float = 120.0, check: bool = True) -> str:
        """Its stdout; ServiceError naming the command when it fails and `check`."""
        return service.checked(self.name, self.run(command, timeout=timeout), check)

    def remove(self, path: str, check: bool = True) -> None:
        self.sh(f"rm -f -- {shlex.quote(path)}", check=check)

    # ------------------------------------------------------------------ files
    def any_exists(self, *paths: str) -> bool:
        """Whether any of `paths` exists on the host (a command that fails raises)."""
        tests = " -o ".join(f"-e {shlex.quote(p)}" for p in paths)
        return self.sh(f"if [ {tests} ]; then echo yes; fi").strip() == "yes"

    def read(self, path: str) -> bytes | None:
        return service.read_file(self.conn, self.host, path)

    def write_atomic(self, path: str, data: bytes, mode: int) -> None:
        service.write_atomic(self.conn, self.host, path, data, mode)

    # ------------------------------------------------------------------ systemd
    def unit_state(self, unit: str) -> dict[str, str]:
        return service.parse_unit_state(self.sh(service.unit_show(unit), check=False))

    def unit_running(self, unit: str) -> bool:
        """Running, or trying to (a Restart= loop between its tries counts)."""
        return self.unit_state(unit).get("ActiveState") in RUNNING

    def is_active(self, unit: str) -> str:
        """`systemctl is-active`: active, activating, inactive, failed ...; "" when systemctl answered nothing (a
        failed command is no answer, never "inactive"); what a host sends is bounded to one printable line."""
        return one_line(self.run(f"systemctl is-active {shlex.quote(unit)}", timeout=60).stdout, 80)

    def start(self, unit: str, timeout: float = 120.0) -> None:
        self.sh(f"systemctl start {shlex.quote(unit)}", timeout=timeout)

    def stop(self, unit: str, timeout: float = 120.0) -> None:
        self.sh(f"systemctl stop {shlex.quote(unit)}", timeout=timeout, check=False)

    # ------------------------------------------------------------------ the host lock
    def acquire_lock(self, purpose: str) -> hostlock.Lock:
        return hostlock.acquire(self.conn, self.host, purpose)

    def release_lock(self, lock: hostlock.Lock) -> None:
        hostlock.release(self.conn, self.host, lock)

    # ------------------------------------------------------------------ facts
    def probe(self) -> HostFacts:
        return probe_run.probe_on(self.conn, self.host)

    def lost(self, where: str, exc: BaseException | None = None) -> None:
        """Raise ConnectionLost when the link died under `exc` (the keepalive watchdog, a dropped transport)."""
        lost_link(self.conn, self.host, where, exc)
