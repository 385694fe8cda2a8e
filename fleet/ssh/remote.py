"""Running commands on a connected host: quoting, become, and results as plain data."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from typing import BinaryIO

import paramiko
from fabric import Connection
from paramiko import SSHException

from fleet import faulthook
from fleet.errors import ConnectError, FleetError
from fleet.inventory import Host
from fleet.ssh import become, deadline, keepalive


class ConnectionLost(ConnectError):
    """The link died under a command (the keepalive watchdog closed it): the command's outcome is unknown."""


def lost_link(conn: Connection, host: Host, where: str, exc: BaseException | None = None) -> None:
    """Raise ConnectionLost when the keepalive watchdog closed this connection, or `exc` came with the link
    dropping under us (e.g. the host died); else nothing."""
    why = keepalive.lost(conn.transport)
    if why is None and exc is not None and not (conn.transport and conn.transport.is_active()):
        why = f"the link dropped ({type(exc).__name__}: {str(exc)[:160]})"
    if why:
        raise ConnectionLost(f"{host.name}: connection lost {where}: {why}") from None


DEFAULT_TIMEOUT_S = 120.0  # a call that names no deadline of its own
MAX_OUTPUT = 4 << 20  # bytes of stdout (and as many of stderr) one call may make the controller hold
STREAM_BLOCK = 1 << 20  # bytes of a file given as stdin read and sent at a time


class CommandTimedOut(FleetError):
    """A command gave no end within its timeout (the channel is closed, the command's outcome is unknown)."""


class ChannelFailed(FleetError):
    """The host refused the command's channel or closed it before answering (the link itself is up)."""


class OutputTooLarge(FleetError):
    """A host sent more than the call's cap: reading stopped there and the channel was closed."""


def mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


@dataclass(frozen=True)
class CommandResult:
    command: str
    exited: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exited == 0


@dataclass(frozen=True)
class BytesResult:
    exited: int
    stdout: bytes
    stderr: bytes


def run(conn: Connection, host: Host, command: str, timeout: float = DEFAULT_TIMEOUT_S,
        max_output: int = MAX_OUTPUT, shown: str | None = None) -> CommandResult:
    """One exec channel; never raises on a non-zero exit (the caller decides what it means). On a become
    host it runs as root (fleet.ssh.become), a sudo password going on stdin. Output is decoded as UTF-8 (bad
    bytes replaced). Raises CommandTimedOut after `timeout` seconds, OutputTooLarge past `max_output` bytes."""
    res = run_bytes(conn, host, command, timeout=timeout, max_output=max_output, shown=shown)
    return CommandResult(command=shown or command, exited=res.exited, stdout=res.stdout.decode("utf-8", "replace"),
                         stderr=res.stderr.decode("utf-8", "replace"))


def _sudo_answer(host: Host, how: become.Become, exited: int, stderr: str) -> None:
    """A `sudo -n` that wants a password fails every command the same way: say so once, with the fix; a sudo
    that ran a password-mode command without asking (the guard stopped it, the password went nowhere) too."""
    if how.mode is become.Mode.PASSWORD and become.guard_refused(exited, stderr):
        raise ConnectError(f"{host.name}: sudo ran a command without asking for the password of user "
                           f"{host.user or 'the login user'}, though `{become.CHECK}` asked for it (a sudoers rule "
                           "for some commands only?): the command was not run and the password was not passed on")
    if how.mode is become.Mode.NOPASSWD and exited == 1 and become.needs_password(stderr):
        raise ConnectError(f"{host.name}: sudo wants a password for user {host.user or 'the login user'} (no NOPASSWD "
                           "rule): give the host a become_password (env: or file:) in the inventory, or run with "
                           "--ask-become-pass")


def run_bytes(conn: Connection, host: Host, command: str, data: bytes | BinaryIO = b"",
              timeout: float = DEFAULT_TIMEOUT_S, max_output: int = MAX_OUTPUT,
              shown: str | None = None) -> BytesResult:
    """One exec channel with `data` on its stdin (then EOF) and the output as bytes: for files, whose contents
    never go in a command line. As root on a become host, like run(). `data` may be a binary file, sent in
    blocks of STREAM_BLOCK as it is read (a 900 MB wheel is never held in memory).

    Every step is under one deadline, `timeout` seconds from now: opening the channel, the exec request's
    answer, stdin, the output and the exit status (a host may close its output and never send one); past it
    the channel is closed and CommandTimedOut raised. More than `max_output` bytes on stdout or on stderr is
    OutputTooLarge, the channel closed at once: a host can make the controller hold no more than that.

    The channel is read on this thread (a blocking read that wakes on data, or every 0.2 s to drain stderr and
    check the deadline): no reader threads and no polling loop per command, which is most of what a command
    costs the client on a large fleet; one process-wide thread (fleet.ssh.deadline) ends the waits paramiko
    cannot time out."""
    short = (shown or command)[:60]  # shown: what the operator typed, when fleet wrapped it
    lost_link(conn, host, f"before `{short}`")  # never let a dead link be silently reopened
    how = become.of(conn, host.become)
    transport = conn.client.get_transport()
    if transport is None or not transport.is_active():
        raise ConnectionLost(f"{host.name}: connection lost before `{short}`: not connected")
    fault = faulthook.remote_step(lambda: step_label(command))
    if fault == "fail":
        return BytesResult(exited=1, stdout=b"", stderr=b"fleet fault hook: injected failure\n")
    if fault == "full":
        _fill(transport, how)
    out, err = bytearray(), bytearray()
    end = time.monotonic() + timeout
    chan, token = None, None

    def late(what: str = "") -> CommandTimedOut:
        return CommandTimedOut(f"{host.name}: `{short}` did not finish within {timeout:g}s{what}; the channel was "
                               "closed (the host is slow, stuck or hostile)")

    def too_much(stream: str) -> OutputTooLarge:
        return OutputTooLarge(f"{host.name}: `{short}` sent more than {mib(max_output)} on {stream}; fleet stopped "
                              "reading and closed the channel (a runaway or hostile command)")

    try:
        chan = transport.open_session(timeout=timeout)
        token = deadline.arm(max(0.0, end - time.monotonic()), chan)
        chan.exec_command(how.wrap(command))
        chan.settimeout(max(0.01, end - time.monotonic()))
        try:
            if isinstance(data, bytes | bytearray):
                chan.sendall(how.stdin() + data)
            else:
                chan.sendall(how.stdin())
                for block in iter(lambda: data.read(STREAM_BLOCK), b""):
                    chan.sendall(block)
            chan.shutdown_write()
        except TimeoutError:
            raise late(" (the host did not read its input)") from None
        except OSError:
            pass  # the command ended without reading all its input: its status and output say why
        if fault == "drop":
            transport.close()
            lost_link(conn, host, f"during `{command[:60]}`", EOFError("fleet fault hook: the link dropped"))
        chan.settimeout(0.2)
        while True:
            if time.monotonic() > end:
                raise late()
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
                if len(err) > max_output:
                    raise too_much("stderr")
            try:
                chunk = chan.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                break  # stdout's end: the command is done, or the deadline closed the channel
            out += chunk
            if len(out) > max_output:
                raise too_much("stdout")
        chan.status_event.wait(max(0.0, end - time.monotonic()))  # set by the status, or by a close
        if not chan.exit_status_ready() or (token.expired and chan.recv_exit_status() == -1):
            raise late(" (its output ended but no exit status came)" if chan.eof_received else "")
        exited = chan.recv_exit_status()
        while chan.recv_stderr_ready() and len(err) <= max_output:
            err += chan.recv_stderr(65536)
        lost_link(conn, host, f"during `{short}`",
                  EOFError("the channel closed without an exit status") if exited == -1 else None)
        _sudo_answer(host, how, exited, err.decode("utf-8", "replace"))
        if fault == "late":
            raise late(" (fleet fault hook: it ran, its answer was lost)")
        return BytesResult(exited=exited, stdout=bytes(out), stderr=bytes(err))
    except (EOFError, OSError, SSHException) as exc:
        lost_link(conn, host, f"during `{short}`", exc)
        if (token is not None and token.expired) or time.monotonic() >= end:
            raise late() from None
        if isinstance(exc, SSHException):
            raise ChannelFailed(f"{host.name}: `{short}`: the host refused or closed the channel "
                                f"({type(exc).__name__}: {str(exc)[:160]})") from None
        raise
    finally:
        if token is not None:
            deadline.disarm(token)
        if chan is not None:
            chan.close()


_GENERIC = frozenset({"run", "run_bytes", "sh", "read_file", "write_atomic", "_space_left", "<lambda>", "file",
                      "keep_file", "save", "event", "load", "events", "events_read"})


def step_label(command: str) -> str:
    """A remote step as the fault harness names it: who asked, and what runs (a shipped program by its name)."""
    try:
        words = shlex.split(command[:20000])
    except ValueError:
        words = command.split()
    if words[:2] == ["sh", "-c"] and len(words) > 3:
        what = " ".join(words[3:])
    elif len(words) > 3 and words[1] == "-c" and words[0].endswith("python"):
        what = "python " + " ".join(w for w in words[3:5] if len(w) < 40)
    else:
        what = " ".join(command.split())
    return f"{faulthook.caller(_GENERIC)}: {what[:70]}"


def journal_step(conn: Connection, host: Host, command: str) -> None:
    """The journal follower's channel is a remote step too (fleet.logs.journal): a fault may fall there."""
    fault = faulthook.remote_step(lambda: step_label(command))
    transport = conn.client.get_transport()
    if fault == "fail":
        raise FleetError(f"{host.name}: `{command[:60]}` failed: fleet fault hook: injected failure")
    if fault == "drop" and transport is not None:
        transport.close()
        raise ConnectionLost(f"{host.name}: connection lost before `{command[:60]}`: fleet fault hook: link dropped")
    if fault == "full" and transport is not None:
        _fill(transport, become.of(conn, host.become))
    if fault == "late":
        raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not answer in time: fleet fault hook: answer lost")


def _fill(transport: paramiko.Transport, how: become.Become) -> None:
    """FLEET_FAULT_FILL on the host, outside the step count: the disks are full from this step on."""
    chan = transport.open_session()
    try:
        chan.exec_command(how.wrap(faulthook.fill_command()))
        chan.sendall(how.stdin())
        chan.shutdown_write()
        chan.recv_exit_status()
    finally:
        chan.close()


def establish_become(conn: Connection, host: Host, password: str | None) -> None:
    """Decide once per connection how it reaches root (fleet.ssh.become) and keep that on it. Without a password,
    `sudo -n` (nothing asked, no round trip here). With one: `sudo -n -- sh -c true` first (the shape of every
    command), so a NOPASSWD rule that covers fleet's commands never receives the password; where it wants one,
    the password is tried once, and refused in one line."""
    if not host.become or password is None:
        return
    user = host.user or "the login user"
    become.attach(conn, become.NONE)  # the check runs sudo itself
    res = run_bytes(conn, host, become.CHECK, timeout=30)
    why = res.stderr.decode("utf-8", "replace").strip()
    if res.exited == 0:
        become.attach(conn, become.Become(become.Mode.NOPASSWD))
        return
    if not become.needs_password(why):
        detail = why.splitlines()[-1] if why else f"exit {res.exited}"
        raise ConnectError(f"{host.name}: sudo failed for {user}: {detail}")
    become.attach(conn, become.Become(become.Mode.PASSWORD, password))
    res = run_bytes(conn, host, "true", timeout=30)
    if res.exited != 0:
        become.attach(conn, become.NONE)
        why = res.stderr.decode("utf-8", "replace").strip()
        raise ConnectError(f"{host.name}: sudo refused the become password for {user}"
                           + (" (wrong password)" if become.password_refused(why) or not why else f": {why}"))
