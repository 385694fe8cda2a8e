"""A TCP listener on loopback that plays a host's port in unit tests: it takes each connection and hands it to
`answer` (keep it open: a wedged sshd; close it: a middlebox; send a line: an HTTP server)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import paramiko


@dataclass
class Listener:
    answer: Callable[[socket.socket], None]
    server: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    accepted: list[float] = field(default_factory=list)  # when each connection came (monotonic)
    held: list[socket.socket] = field(default_factory=list)  # connections `answer` kept open
    taken: threading.Event = field(default_factory=threading.Event)  # set at the first connection

    @property
    def port(self) -> int:
        return int(self.server.getsockname()[1])

    thread: threading.Thread | None = None

    def start(self) -> Listener:
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        """No connection taken after it, and every one taken closed: one accepted while it closed the held ones
        was left open, and its ResourceWarning failed whatever test the collector then ran in."""
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way
        except OSError:
            pass
        self.server.close()
        if self.thread is not None:
            self.thread.join(5)
        for sock in self.held:
            sock.close()

    def __enter__(self) -> Listener:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(time.monotonic())
            self.taken.set()
            self.answer(sock)


def close(sock: socket.socket) -> None:
    """Close each connection at once, saying nothing (sshd refusing: MaxStartups, a middlebox)."""
    sock.close()


def silent() -> Listener:
    """A listener that holds each connection open and sends nothing (a wedged sshd)."""
    listener = Listener(answer=lambda sock: None)
    listener.answer = listener.held.append
    return listener


def ssh_server(key: paramiko.PKey) -> Callable[[socket.socket], None]:
    """A real SSH server (paramiko's) offering `key` as its host key and accepting no login."""
    def answer(sock: socket.socket) -> None:
        transport = paramiko.Transport(sock)
        transport.add_server_key(key)
        transport.start_server(server=paramiko.ServerInterface())  # its defaults refuse every login
    return answer
