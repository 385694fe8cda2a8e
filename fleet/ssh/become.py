"""How a command reaches root on a `become: true` host: the sudo line and what goes on its stdin.

Three ways, decided once per connection (fleet.ssh.remote.establish_become) and kept on it:

    NONE       not a become host: the command as it is
    NOPASSWD   `sudo -n -- sh -c CMD` (never a prompt: a rule that wants a password fails at once)
    PASSWORD   `sudo -k -S -p '' -- sh -c CMD` with the password as the first line of stdin

With a password, `-k` makes sudo ask every time (no cached timestamp), so the first line of stdin is always
the password and what follows is the command's own input: sudo reads its password one byte at a time, up to
the newline, and leaves the rest. The password is never in a command line.
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
        sudo = "sudo -k -S -p ''" if self.mode is Mode.PASSWORD else "sudo -n"
        return f"{sudo} -- sh -c {shlex.quote(command)}"

    def stdin(self) -> bytes:
        """What goes on the channel's stdin before the command's own input."""
        if self.mode is Mode.PASSWORD and self.password is not None:
            return self.password.encode() + b"\n"
        return b""


NONE = Become()
CHECK = "sudo -n true"  # succeeds without a password where a NOPASSWD rule (or no rule at all for root) applies
_ATTR = "fleet_become"


def password_refused(stderr: str) -> bool:
    """sudo's answer when the password was wrong (-S with an empty prompt prints only this)."""
    low = stderr.lower()
    return any(s in low for s in ("incorrect password", "sorry, try again", "password attempts",
                                  "no password was provided"))


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
