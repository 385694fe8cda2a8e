"""What a host sent first on its SSH port, kept to name it: something that is not SSH (an HTTP server on the
port), or an SSH banner and then nothing, or a close, in the key exchange (a wedged or refusing sshd)."""

from __future__ import annotations

import socket
from typing import Any

from paramiko import SSHException


class Heard:
    """A socket that keeps the first bytes the host sent: what answered in place of an SSH banner (an HTTP
    server on the SSH port) is named, not taken for a closed connection. Everything else is the socket's."""

    KEPT = 256

    def __init__(self, sock: socket.socket):
        self._sock, self.heard = sock, b""

    def recv(self, n: int) -> bytes:
        data = self._sock.recv(n)
        if len(self.heard) < self.KEPT:
            self.heard += data[:self.KEPT - len(self.heard)]
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _shown(line: bytes) -> str:
    """A line a host sent, printable and cut to 80 characters."""
    return "".join(c if c.isprintable() else "?" for c in line.rstrip(b"\r").decode("latin-1"))[:80]


def not_ssh(heard: bytes) -> str | None:
    """What a host sent where the SSH banner belongs, when it is something else: its first line, printable and
    cut ('HTTP/1.1 400 Bad Request', an HTTP server), or None (nothing sent, or a banner)."""
    first = heard.lstrip(b"\r\n").split(b"\n", 1)[0].rstrip(b"\r")
    if not first or first.startswith(b"SSH-"):
        return None
    return f"{_shown(first)!r}" + (" (an HTTP server)" if first.startswith(b"HTTP/") else "")


def after_banner(where: str, heard: bytes, exc: BaseException, waited: float) -> str | None:
    """A host whose SSH banner came, then nothing (start_client's deadline: "No existing session") or a closed
    connection (EOFError): its key exchange stalled or was refused. The no-banner words misnamed the first (`sent
    no SSH banner`) and the second said only `EOFError: `. None for anything else."""
    line = next((ln for ln in heard.split(b"\n") if ln.startswith(b"SSH-")), None)
    if line is not None and isinstance(exc, SSHException) and str(exc).lower() != "no existing session":
        return (f"{where}: sent its SSH banner ({_shown(line)!r}), then the key exchange failed ({exc}): sshd there "
                "speaks no SSH fleet can talk to, or something on the path alters the connection; check sshd's log "
                "there and `ssh -v` from this machine")  # it was `SSHException: Invalid packet blocking`
    if line is None or not (isinstance(exc, EOFError) or str(exc).lower() == "no existing session"):
        return None
    banner = _shown(line)
    if isinstance(exc, EOFError):
        return (f"{where}: sent its SSH banner ({banner!r}), then closed the connection in the key exchange (sshd "
                "refusing: MaxStartups, hosts.deny, no algorithm in common); check sshd's log there, then retry")
    return (f"{where}: sent its SSH banner ({banner!r}), then nothing within {waited:.0f}s: the key exchange never "
            "came (a wedged sshd, an overloaded host); check sshd there (its console), then retry")
