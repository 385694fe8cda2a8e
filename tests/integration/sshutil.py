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
_recording = threading.local()


def _audit(event, args):
    if event == "socket.connect" and getattr(_recording, "on", False):
        _connects.append(args[1])


sys.addaudithook(_audit)


@contextlib.contextmanager
def recording_connects() -> Iterator[list]:
    """Every socket.connect this thread makes inside the block: its (address, port) list."""
    _connects.clear()
    _recording.on = True
    try:
        yield _connects
    finally:
        _recording.on = False
