"""Running commands on a connected host: quoting, become, and results as plain data."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import paramiko
from fabric import Connection
from paramiko import ChannelException, SSHException

from fleet.errors import ConnectError, FleetError, NotReached
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
# What the login shell prints before the command runs (a ~/.bashrc that greets: bash reads it for the commands sshd
# runs) comes before this mark, on stdout and on stderr, and is left out: it is no output of fleet's command.
MARK = b"\x1e\x1ffleet\x1f\x1e"
_MARKED = "printf '\\036\\037fleet\\037\\036'; printf '\\036\\037fleet\\037\\036' >&2; "


def unmarked(data: bytes) -> bytes:
    """What the command wrote: the output after the mark (all of it where no mark came)."""
    at = data.find(MARK)
    return data[at + len(MARK):] if at >= 0 else data
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
                           "for some commands only?): the command was not run and the password was not passed on",
                           cause=NotReached.SUDO)
    if how.mode is become.Mode.NOPASSWD and exited == 1 and become.needs_password(stderr):
        raise ConnectError(f"{host.name}: sudo wants a password for user {host.user or 'the login user'} (no NOPASSWD "
                           "rule): give the host a become_password (env: or file:) in the inventory, or run with "
                           "--ask-become-pass", cause=NotReached.SUDO)


class Runner(Protocol):
    """How a connection's commands reach its host: `exchange` itself, or a wrapper of it chosen once when the
    connection opened (fleet.ssh.faulty, under the fault harness's variables)."""

    def run_bytes(self, conn: Connection, host: Host, command: str, data: bytes | BinaryIO, timeout: float,
                  max_output: int) -> BytesResult: ...

    def open_channel(self, conn: Connection, host: Host, command: str, open_s: float,
                     what: str) -> paramiko.Channel: ...


_RUNNER = "_fleet_runner"


def use_runner(conn: Connection, runner: Runner) -> None:
    """Kept on the connection's SSH transport, as its become is (fleet.ssh.become.attach)."""
    setattr(conn.transport, _RUNNER, runner)


def _runner(conn: Connection) -> Runner:
    return getattr(getattr(conn, "transport", None), _RUNNER, None) or DIRECT


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
    try:
        return _runner(conn).run_bytes(conn, host, command, data, timeout, max_output)
    except FleetError as exc:  # shown: what the operator typed, when fleet wrapped it; errors name that
        if shown is not None and len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (exc.args[0].replace(f"`{command[:60]}`", f"`{shown[:60]}`"),)
        raise


def connected(conn: Connection, host: Host, command: str) -> paramiko.Transport:
    """The connection's live transport; ConnectionLost before `command` when the link is gone (a dead link is
    never silently reopened)."""
    short = command[:60]
    lost_link(conn, host, f"before `{short}`")
    transport = conn.client.get_transport()
    if transport is None or not transport.is_active():
        raise ConnectionLost(f"{host.name}: connection lost before `{short}`: not connected")
    live: paramiko.Transport = transport
    return live


def label(command: str) -> str:
    """A command as an error names it: a program fleet ships by its name (`fleet-status`, its $0), not the first
    60 characters of its quoted text (`sh -c '# inv status'"'"'s one round trip (fl`); else those characters."""
    try:
        words = shlex.split(command[:200_000])
    except ValueError:
        return command[:60]
    shipped = len(words) > 3 and words[0] in ("sh", "bash") and words[1] == "-c" and words[3].startswith("fleet-")
    return words[3] if shipped else command[:60]


def refused_session(host: Host, what: str, exc: ChannelException) -> ChannelFailed:
    """sshd would not open a session channel (paramiko's `ChannelException(2, 'Connect failed')`, said as such)."""
    return ChannelFailed(f"{host.name}: sshd there refused to open a session for {what} (SSH channel open failure "
                         f"{exc.code}: {exc.text}): its MaxSessions, or a limit on the user's logins (pam_limits "
                         "maxlogins); check sshd's log there (journalctl -u ssh)")


def late(host: Host, command: str, timeout: float, what: str = "") -> CommandTimedOut:
    return CommandTimedOut(f"{host.name}: `{command[:60]}` did not finish within {timeout:g}s{what}; the channel "
                           "was closed (the host is slow, stuck or hostile)")


def exchange(conn: Connection, host: Host, command: str, data: bytes | BinaryIO, timeout: float, max_output: int,
             sent: Callable[[], None] | None = None) -> BytesResult:
    """run_bytes's I/O: one channel, its input, its output under the deadline. `sent`: called once the command
    and its input are on their way (a wrapper's moment to act while it runs)."""
    short = command[:60]
    transport = connected(conn, host, command)
    how = become.of(conn, host.become)
    out, err = bytearray(), bytearray()
    end = time.monotonic() + timeout
    chan, token = None, None

    def too_much(stream: str) -> OutputTooLarge:
        return OutputTooLarge(f"{host.name}: `{short}` sent more than {mib(max_output)} on {stream}; fleet stopped "
                              "reading and closed the channel (a runaway or hostile command)")

    try:
        try:
            chan = transport.open_session(timeout=timeout)
        except ChannelException as exc:
            raise refused_session(host, f"`{label(command)}`", exc) from None
        token = deadline.arm(max(0.0, end - time.monotonic()), chan)
        chan.exec_command(_MARKED + how.wrap(command))
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
            raise late(host, command, timeout, " (the host did not read its input)") from None
        except OSError:
            pass  # the command ended without reading all its input: its status and output say why
        if sent is not None:
            sent()
        chan.settimeout(0.2)
        while True:
            if time.monotonic() > end:
                raise late(host, command, timeout)
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
            raise late(host, command, timeout,
                       " (its output ended but no exit status came)" if chan.eof_received else "")
        exited = chan.recv_exit_status()
        while chan.recv_stderr_ready() and len(err) <= max_output:
            err += chan.recv_stderr(65536)
        lost_link(conn, host, f"during `{short}`",
                  EOFError("the channel closed without an exit status") if exited == -1 else None)
        _sudo_answer(host, how, exited, err.decode("utf-8", "replace"))
        return BytesResult(exited=exited, stdout=unmarked(bytes(out)), stderr=unmarked(bytes(err)))
    except (EOFError, OSError, SSHException) as exc:
        lost_link(conn, host, f"during `{short}`", exc)
        if (token is not None and token.expired) or time.monotonic() >= end:
            raise late(host, command, timeout) from None
        if isinstance(exc, SSHException):
            raise ChannelFailed(f"{host.name}: `{label(command)}`: the host refused or closed the channel "
                                f"({type(exc).__name__}: {str(exc)[:160]})") from None
        raise
    finally:
        if token is not None:
            deadline.disarm(token)
        if chan is not None:
            chan.close()


def open_channel(conn: Connection, host: Host, command: str, open_s: float, what: str) -> paramiko.Channel:
    """A channel of its own running `command` (as root on a become host), its output left to the caller to read
    (`what`: the journal's follower): through the connection's runner, like every command."""
    if conn.client.get_transport() is None:
        raise ConnectionLost(f"{host.name}: not connected")
    return _runner(conn).open_channel(conn, host, command, open_s, what)


def start_channel(conn: Connection, host: Host, command: str, open_s: float, what: str) -> paramiko.Channel:
    """open_channel's I/O: the channel opened and `command` started within `open_s` seconds."""
    transport = conn.client.get_transport()
    assert transport is not None  # open_channel checked
    how = become.of(conn, host.become)
    try:
        chan = transport.open_session(timeout=open_s)
    except ChannelException as exc:
        raise refused_session(host, what, exc) from None
    token = deadline.arm(open_s, chan)
    try:
        chan.exec_command(_MARKED + how.wrap(command))  # its reader leaves out what comes before the mark
        if how.stdin():
            chan.settimeout(open_s)
            chan.sendall(how.stdin())  # sudo's password; the command reads nothing more
    except (OSError, EOFError, SSHException):
        chan.close()
        if token.expired:
            raise CommandTimedOut(f"{host.name}: {what} did not start within {open_s:g}s") from None
        raise
    finally:
        deadline.disarm(token)
    started: paramiko.Channel = chan
    return started


class _Direct:
    """Commands straight to the host: the runner of every connection the fault harness does not wrap."""

    def run_bytes(self, conn: Connection, host: Host, command: str, data: bytes | BinaryIO, timeout: float,
                  max_output: int) -> BytesResult:
        return exchange(conn, host, command, data, timeout, max_output)

    def open_channel(self, conn: Connection, host: Host, command: str, open_s: float,
                     what: str) -> paramiko.Channel:
        return start_channel(conn, host, command, open_s, what)


DIRECT: Runner = _Direct()


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
        raise ConnectError(f"{host.name}: sudo failed for {user}: {detail}", cause=NotReached.SUDO)
    become.attach(conn, become.Become(become.Mode.PASSWORD, password))
    res = run_bytes(conn, host, "true", timeout=30)
    if res.exited != 0:
        become.attach(conn, become.NONE)
        why = res.stderr.decode("utf-8", "replace").strip()
        raise ConnectError(f"{host.name}: sudo refused the become password for {user}"
                           + (" (wrong password)" if become.password_refused(why) or not why else f": {why}"),
                           cause=NotReached.SUDO)
