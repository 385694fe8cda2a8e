"""How a command reaches root on a `become: true` host: the sudo line and what goes on its stdin.

Three ways, decided once per connection (fleet.ssh.remote.establish_become) and kept on it:

    NONE       not a become host: the command as it is
    NOPASSWD   `sudo -n -- sh -c CMD` (never a prompt: a rule that wants a password fails at once)
    PASSWORD   `sudo -k -S -p '' -- sh -c GUARD+CMD` with the password, then a marker line, on stdin

Which one is decided with the shape fleet runs (`sudo -n -- sh -c true`): a rule that lets `sh` run without a
password (`NOPASSWD: /bin/sh` beside `ALL`) makes it NOPASSWD, so the password is never sent. With a password,
`-k` makes sudo ask every time (no cached timestamp): sudo reads its password one byte at a time, up to the
newline, and leaves the rest. Should sudo run the command without asking all the same, the password line would
be the command's input: GUARD reads the first line and runs CMD only when it is the marker, else exits
GUARD_REFUSED without writing the line anywhere. The password is never in a command line.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Mode(StrEnum):
    NONE = "none"
    NOPASSWD = "nopasswd"
    PASSWORD = "password"


@dataclass(frozen=True)
class Become:
    mode: Mode = Mode.NONE
    password: str | None = field(default=None, repr=False)

    def wrap(self, command: str) -> str:
        """The command line to send."""
        if self.mode is Mode.NONE:
            return command
        if self.mode is Mode.NOPASSWD:
            return f"sudo -n -- sh -c {shlex.quote(command)}"
        return f"sudo -k -S -p '' -- sh -c {shlex.quote(GUARD + command)}"

    def stdin(self) -> bytes:
        """What goes on the channel's stdin before the command's own input."""
        if self.mode is Mode.PASSWORD and self.password is not None:
            return self.password.encode() + b"\n" + MARKER.encode() + b"\n"
        return b""


MARKER = "fleet-sudo-read-the-password"
GUARD_REFUSED = 125
# The first line the command reads must be the marker: sudo took the line before it (the password).
GUARD = (f'IFS= read -r _fleet_line; [ "$_fleet_line" = {MARKER} ] || {{ unset _fleet_line; '
         f'echo "fleet: sudo did not read the password" >&2; exit {GUARD_REFUSED}; }}; unset _fleet_line\n')


NONE = Become()
# The shape every command runs as: succeeds without a password where a NOPASSWD rule covers it (or for root)
CHECK = Become(Mode.NOPASSWD).wrap("true")
_ATTR = "fleet_become"


def password_refused(stderr: str) -> bool:
    """sudo's answer when the password was wrong (-S with an empty prompt prints only this)."""
    low = stderr.lower()
    return any(s in low for s in ("incorrect password", "sorry, try again", "password attempts",
                                  "no password was provided"))


def guard_refused(exited: int, stderr: str) -> bool:
    """A password-mode command that stopped because sudo ran it without reading the password."""
    return exited == GUARD_REFUSED and "fleet: sudo did not read the password" in stderr


def needs_password(stderr: str) -> bool:
    """`sudo -n`'s answer where a rule asks for a password."""
    return "a password is required" in stderr.lower()


def attach(conn: Any, become: Become) -> None:
    """Kept on the connection's SSH transport (a Fabric Connection turns attributes into config keys): a
    reconnect starts without it, and so back at `sudo -n`, which never sends a password anywhere."""
    setattr(conn.transport, _ATTR, become)


def of(conn: Any, host_become: bool) -> Become:
    """The way this connection reaches root; a become host nobody established runs `sudo -n`."""
    found = getattr(getattr(conn, "transport", None), _ATTR, None)
    if isinstance(found, Become):
        return found
    return Become(Mode.NOPASSWD) if host_become else NONE
