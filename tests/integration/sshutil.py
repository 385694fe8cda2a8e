"""What the SSH tests share: one command on a sandbox host over a fresh fleet connection, and a record of the
sockets this thread connects (Python's audit hook, not a mock)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import CommandResult, run, run_bytes


def sh(host: Host, command: str, opts: ConnectOptions | None = None) -> CommandResult:
    conn = open_connection(host, opts)
    try:
        return run(conn, host, command)
    finally:
        conn.close()


_connects: list = []
_lookups: list = []
_recording = threading.local()


def _audit(event, args):
    if not getattr(_recording, "on", False):
        return
    if event == "socket.connect":
        _connects.append(args[1])
    elif event == "socket.getaddrinfo":
        _lookups.append(args[0])


sys.addaudithook(_audit)


@contextlib.contextmanager
def recording_connects() -> Iterator[list]:
    """Every socket.connect this thread makes inside the block: its (address, port) list."""
    _connects.clear()
    _lookups.clear()
    _recording.on = True
    try:
        yield _connects
    finally:
        _recording.on = False


def lookups() -> list:
    """The names getaddrinfo was asked for inside the last recording_connects block."""
    return list(_lookups)


def make_sudo_user(root: Host, name: str, password: str) -> None:
    """A login user on the host with root's authorized key and `ALL=(ALL:ALL) ALL` (sudo asks for the password),
    made through root; the password goes to chpasswd on stdin, never in a command line."""
    sh(root, f"id {name} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {name}; "
             f"install -d -m 0700 -o {name} -g {name} ~{name}/.ssh && install -m 0600 -o {name} -g {name} "
             f"/root/.ssh/authorized_keys ~{name}/.ssh/authorized_keys; "
             f"echo '{name} ALL=(ALL:ALL) ALL' > /etc/sudoers.d/{name} && chmod 0440 /etc/sudoers.d/{name}")
    conn = open_connection(root)
    try:
        res = run_bytes(conn, root, "chpasswd", f"{name}:{password}\n".encode(), 30)
        assert res.exited == 0, res.stderr
    finally:
        conn.close()
