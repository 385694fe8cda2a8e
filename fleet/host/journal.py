"""The systemd journal on a host: the journalctl commands fleet runs, by what they are for (the follower that
reads a unit's lines as they come is fleet.logs.journal's; its channel is opened here)."""

from __future__ import annotations

import shlex

import paramiko
from fabric import Connection

from fleet.host.service import sh
from fleet.inventory import Host
from fleet.ssh.remote import MARK as MARK  # the follower leaves out what the login shell printed before it
from fleet.ssh.remote import open_channel
from fleet.ssh.remote import unmarked as unmarked


def command(unit: str, cursor: str | None = None, output: str = "cat", since: str | None = None,
            follow: bool = True, lines: int | None = None) -> str:
    """journalctl for the unit: after `cursor` (nothing before it, nothing twice), else from `since` (journalctl's
    own value: '-10m', '20:00'), the last `lines` of it."""
    cmd = f"journalctl -u {shlex.quote(unit)} -o {output} --no-pager --all"  # --all: a line with \r or a colour
    # code is the line, never `[82B blob data]`
    if since and lines is not None and cursor is None:
        return _last_of_span(cmd, f"{cmd} --since={shlex.quote(since)}", int(lines), follow)
    if cursor is not None:
        cmd += f" --after-cursor={shlex.quote(cursor)}" if cursor else " -n 0"
    if since:
        cmd += f" --since={shlex.quote(since)}"
    if lines is not None and cursor is None:
        cmd += f" -n {int(lines)}"
    return cmd + (" -f" if follow else "")


def _last_of_span(base: str, span: str, lines: int, follow: bool) -> str:
    """The last `lines` entries of the span, then (`follow`) every later one. journalctl seeks to --since before
    it counts -n (systemd 252, Debian 12's): `--since X -n N` gives the span's first N entries, and with -f the
    whole span. So the span is cut by tail on the host, and the follower starts after its last entry's cursor
    (nothing twice, nothing lost in between; an empty span is followed from --since)."""
    if not follow:  # the span read once with -n 0 first: a --since journalctl refuses ends with its status, not tail's
        return f"{span} -n 0 -q >/dev/null && {span} | tail -n {lines}"
    return (f"out=$({span} --show-cursor | tail -n {lines + 1}); "
            "[ -n \"$out\" ] && printf '%s\\n' \"$out\" | sed '/^-- cursor: /d'; "
            "c=$(printf '%s\\n' \"$out\" | sed -n 's/^-- cursor: //p'); "
            f"if [ -n \"$c\" ]; then exec {base} --after-cursor=\"$c\" -f; else exec {span} -f; fi")


def cursor_of(conn: Connection, host: Host) -> str:
    """The journal's current end ("" when it gives none)."""
    out = sh(conn, host, "journalctl --show-cursor -n 0 -q -o cat; true")
    for line in out.splitlines():
        if line.startswith("-- cursor: "):
            return line[len("-- cursor: "):].strip()
    return ""


def journal_tail(conn: Connection, host: Host, unit: str, lines: int = 3) -> str:
    """The unit's last `lines` lines, as printed ("" when none could be read)."""
    return sh(conn, host, f"journalctl -u {shlex.quote(unit)} -n {int(lines)} -o cat --no-pager --all || true")


def open_follower(conn: Connection, host: Host, journal_command: str, open_s: float) -> paramiko.Channel:
    """`journal_command` started on a channel of its own, within `open_s` seconds, its output left to read."""
    return open_channel(conn, host, journal_command, open_s, "the journal")
