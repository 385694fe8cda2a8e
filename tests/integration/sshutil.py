"""What the SSH tests share: one command on a sandbox host over a fresh fleet connection, and a record of the
sockets this thread connects (Python's audit hook, not a mock)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from fleet.connect import ConnectOptions, open_connection
from fleet.inventory import Host
from fleet.remote import CommandResult, run


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
