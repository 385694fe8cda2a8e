"""Hostile hosts in the test process: an SSH server (paramiko's server side) on a loopback port per host,
which answers each command the way a wedged, half-dead or compromised GPU host would.

A host is given `answers`: (substring of the command, Behaviour) pairs, the first match wins, else `default`
(SILENT: the TCP connection is accepted and nothing is ever sent, not even the SSH banner; CLOSE_SILENT: the
same, closed half a second later).
A Behaviour runs on its own thread with the channel and the command. The controller side is fleet's own,
unchanged: strict host keys (a known_hosts file written here), key authentication, keepalive, become off.

    with HostileFleet(tmp_path, {"h0": flood(), "h1": answer(b"ok\\n")}) as fleet:
        hosts = fleet.hosts()            # fleet.inventory.Host objects, from an inventory file it wrote
        fleet.inventory                  # that file, for `inv ... -i`
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko
import yaml

from fleet import inventory

Behaviour = Callable[[paramiko.Channel, str, threading.Event], None]

_HOST_KEY = paramiko.ECDSAKey.generate()
_CLIENT_KEY = paramiko.ECDSAKey.generate()


def _until_closed(chan: paramiko.Channel, stop: threading.Event) -> None:
    while not chan.closed and not stop.wait(0.05):
        pass


def _send(chan: paramiko.Channel, data: bytes) -> bool:
    try:
        chan.sendall(data)
        return True
    except (OSError, EOFError, paramiko.SSHException):
        return False


def answer(stdout: bytes = b"", stderr: bytes = b"", status: int = 0) -> Behaviour:
    """An ordinary answer: the output, the status, the end."""
    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        if stdout:
            _send(chan, stdout)
        if stderr:
            chan.sendall_stderr(stderr)
        chan.send_exit_status(status)
        chan.close()
    return run


def flood(chunk: bytes = b"y" * 1023 + b"\n") -> Behaviour:
    """Endless output, as fast as the controller takes it."""
    block = chunk * max(1, 65536 // len(chunk))

    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        while not stop.is_set() and _send(chan, block):
            pass
    return run


def flood_stderr() -> Behaviour:
    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        block = b"e" * 65535 + b"\n"
        while not stop.is_set() and not chan.closed:
            try:
                chan.sendall_stderr(block)
            except (OSError, EOFError, paramiko.SSHException):
                return
    return run


def one_line(chunk: int = 65536) -> Behaviour:
    """One enormous line: bytes with no newline, forever."""
    return flood(b"a" * chunk)


def garbage(size: int = 1 << 16, status: int = 0) -> Behaviour:
    """Binary garbage (every byte value, invalid UTF-8 included), then an ordinary end."""
    return answer(os.urandom(size) + bytes(range(256)), status=status)


def eof_no_status(stdout: bytes = b"partial\n") -> Behaviour:
    """Output, then EOF, then never an exit status (`exec >&- 2>&-; sleep 600`)."""
    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        _send(chan, stdout)
        chan.shutdown_write()
        _until_closed(chan, stop)
    return run


def no_eof(stdout: bytes = b"partial") -> Behaviour:
    """Output, then silence with the channel open: no EOF ever."""
    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        _send(chan, stdout)
        _until_closed(chan, stop)
    return run


def dribble(every: float = 0.05) -> Behaviour:
    """One byte at a time, slowly, forever: never silent long enough to look dead."""
    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        while not stop.wait(every) and _send(chan, b"."):
            pass
    return run


def drop(stdout: bytes = b"") -> Behaviour:
    """The link drops under the command (the whole SSH connection, as a host that dies)."""
    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        if stdout:
            _send(chan, stdout)
        transport = chan.get_transport()
        if transport is not None:
            transport.close()
    return run


def close_channel() -> Behaviour:
    """The channel closed with no status and no EOF first."""
    def run(chan: paramiko.Channel, command: str, stop: threading.Event) -> None:
        chan.close()
    return run


HANG_EXEC = "hang-exec"  # a default that never answers the exec request at all
SILENT = "silent"  # a host that accepts the TCP connection and never sends a byte: no SSH banner (a wedged sshd)
CLOSE_SILENT = "close-silent"  # accepts, sends nothing, closes half a second later (a middlebox, MaxStartups)


class _Server(paramiko.ServerInterface):
    def __init__(self, host: HostileHost):
        self.host = host

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        ok = key.get_base64() == _CLIENT_KEY.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        text = command.decode("utf-8", "replace")
        self.host.commands.append(text)
        behaviour = self.host.behaviour_for(text)
        if behaviour == HANG_EXEC:
            self.host.stop.wait()  # the transport's own thread: nothing more on this connection is answered
            return False
        assert callable(behaviour)
        threading.Thread(target=self.host.run_behaviour, args=(behaviour, channel, text), daemon=True).start()
        return True


class HostileHost:
    def __init__(self, name: str, default: Behaviour | str, answers: list[tuple[str, Behaviour]] | None = None):
        self.name, self.default, self.answers = name, default, list(answers or [])
        self.commands: list[str] = []
        self.stop = threading.Event()
        self.closed_by_client = 0
        self._transports: list[paramiko.Transport] = []
        self._silent: list[socket.socket] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, name=f"hostile-{name}", daemon=True).start()

    def behaviour_for(self, command: str) -> Behaviour | str:
        for needle, behaviour in self.answers:
            if needle in command:
                return behaviour
        return self.default

    def run_behaviour(self, behaviour: Behaviour, chan: paramiko.Channel, command: str) -> None:
        time.sleep(0.1)  # as sshd does, the exec request is answered before the command's first byte
        try:
            behaviour(chan, command, self.stop)
        except (OSError, EOFError, paramiko.SSHException):
            pass

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self._sock.accept()
            except OSError:
                return
            if self.default == SILENT:  # held open, never read or written, until the host closes
                self._silent.append(sock)
                continue
            if self.default == CLOSE_SILENT:
                threading.Timer(0.5, sock.close).start()
                continue
            transport = paramiko.Transport(sock)
            transport.add_server_key(_HOST_KEY)
            self._transports.append(transport)
            try:
                transport.start_server(server=_Server(self))
            except (OSError, EOFError, paramiko.SSHException):
                transport.close()

    def close(self) -> None:
        self.stop.set()
        self._sock.close()
        for t in self._transports:
            t.close()
        for sock in self._silent:
            sock.close()


class HostileFleet:
    """Hosts by name, each a HostileHost; an inventory, known_hosts and key for fleet to reach them."""

    def __init__(self, folder: Path, hosts: dict[str, Behaviour | str | tuple[Behaviour | str, list[Any]]]):
        self.folder = folder = folder / "hostile"  # fleet reads every YAML file of an inventory's folder
        folder.mkdir(exist_ok=True)
        self.servers: dict[str, HostileHost] = {}
        for name, spec in hosts.items():
            default, answers = spec if isinstance(spec, tuple) else (spec, [])
            self.servers[name] = HostileHost(name, default, answers)
        key = folder / "id_ecdsa"
        _CLIENT_KEY.write_private_key_file(str(key))
        known = folder / "known_hosts"
        known.write_text("".join(f"[127.0.0.1]:{s.port} {_HOST_KEY.get_name()} {_HOST_KEY.get_base64()}\n"
                                 for s in self.servers.values()))
        config = folder / "ssh_config"
        config.write_text("")
        self.inventory = folder / "hostile.yaml"
        self.inventory.write_text(yaml.safe_dump({
            "defaults": {"user": "root", "identity_file": str(key), "known_hosts": str(known),
                         "ssh_config": str(config)},
            "hosts": {name: {"address": "127.0.0.1", "port": s.port} for name, s in self.servers.items()}}))

    def hosts(self, *names: str) -> list[inventory.Host]:
        inv = inventory.load(self.inventory)
        return [inv.hosts[n] for n in (names or self.servers)]

    def __enter__(self) -> HostileFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        for s in self.servers.values():
            s.close()


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux: VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result or the exception raised)."""
    start = time.monotonic()
    try:
        value: Any = fn()
    except Exception as exc:  # noqa: BLE001 - the caller judges what came back
        value = exc
    return time.monotonic() - start, value
