"""A host's compile and tune caches, through fleet/host/programs/kcache.py (one round trip each): collected as
a bounded tar, placed after its checksum by rename, cleared. Typed answers; nothing here decides whether to.

PLACED names the folders a place filled until a start served with them (`modules`, read after it served) or
they were cleared: a put-back of a release (a fall-back, a dead run's recovery, a rollback) removes what it names
before that release starts (drop_unproven), so a cache a dead or failed warm start left never starts it."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from fabric import Connection

from fleet.host import programs
from fleet.host.releases import ROOT
from fleet.inventory import Host
from fleet.ssh.remote import BytesResult, ChannelFailed, CommandTimedOut, OutputTooLarge, run_bytes

TIMEOUT_S = 300.0
PLACED = f"{ROOT}/kcache-placed"
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")  # an account name (fleet.inventory's serve.user)


def _account(user: str) -> str:
    """The user the host's steps drop to ("" for root or none); a name that is no account name is refused here,
    never sent."""
    if not user or user == "root":
        return ""
    if not _USER.fullmatch(user):
        raise ValueError(f"{user!r} is no user name")
    return user


def _as(user: str) -> list[str]:
    """kcache.py's --user: run as root, it does its work as that user (root's mark opened first)."""
    return [f"--user={name}"] if (name := _account(user)) else []


NOT_RUN = programs.NOT_RUN


_HOME = re.compile(r"/(?:[A-Za-z0-9_.@+-]+/)*[A-Za-z0-9_.@+-]+")  # absolute, plain names, no `..` (checked below)


def home(conn: Connection, host: Host, user: str) -> str | None:
    """The home of `user` as systemd hands it to a unit run as that user (the passwd entry's: User= sets HOME),
    one round trip; root's is /root, asked nothing. None where the host has no such account or does not answer
    (parse_home)."""
    name = _account(user)
    if not name:
        return "/root"
    try:
        res = run_bytes(conn, host, f"getent passwd {shlex.quote(name)}", timeout=30, max_output=4096)
    except (CommandTimedOut, OutputTooLarge, ChannelFailed):
        return None
    return parse_home(name, res.stdout.decode("ascii", "replace")) if res.exited == 0 else None


def parse_home(name: str, text: str) -> str | None:
    """The home folder of `name`'s passwd line (pure): None unless it is one line for that name whose home is a
    plain absolute folder two levels deep at least (a hostile host's answer never names a folder the warm start
    acts in: `/`, `..`, spaces, another account's line)."""
    lines = text.strip("\n").split("\n")
    fields = lines[0].split(":") if len(lines) == 1 else []
    found = fields[5] if len(fields) == 7 and fields[0] == name else ""
    plain = _HOME.fullmatch(found) and ".." not in found.split("/") and found.count("/") >= 2
    return found.rstrip("/") if plain else None


def command(venv: str, user: str, *args: str) -> str:
    """kcache.py's command line, always on the host's own Python, isolated and without site (-I -S: no PYTHON*
    variable, no user site, no .pth), never on the venv's: kcache.py needs the standard library only, and a venv's
    bin/python or a .pth in it is whatever its owner made them, which root must never run. Run as root for a user
    (--user), it drops to that user before it touches a cache folder; `venv` (--venv) is a folder it never swaps."""
    return programs.system_python_command("kcache.py", f"--venv={venv}", *_as(user), *args)


def drop_unproven(mark: str = PLACED, user: str = "", wait_s: int = 240) -> str:
    """Shell that removes the folders `mark` names (absolute, two parts at least, no '..', no link on the path: the
    mark names real paths), then `mark`; after the place or clear still at work on the host, if any (its lock,
    kcache.py's, waited for `wait_s` at most: a place that holds it longer is left to finish and mark what it fills,
    nothing removed here, so the mark it writes through is never lost and a later put-back removes it). Run as root
    for `user` (the unit's User=), each removal runs as that user (runuser): a folder swapped at a marked path after
    the check is removed only as far as that user may."""
    name = _account(user)
    who = f"[ \"$(id -u)\" != 0 ] || r='runuser -u {name} --'; " if name else ""
    return (f"m={shlex.quote(mark)}; r=; {who}if [ -d \"${{m%/*}}\" ]; then {{ flock -w {int(wait_s)} 9 2>/dev/null && "
            "if [ -f \"$m\" ]; then while IFS= read -r f; do case \"$f\" in *..*) ;; "
            "/?*/?*) if [ -d \"$f\" ] && [ \"$(readlink -f -- \"$f\")\" = \"$f\" ]; then $r sh -c "
            "'mv -T -- \"$1\" \"$1.fleet-kcache-old-$2\" && rm -rf -- \"$1.fleet-kcache-old-$2\"' sh \"$f\" $$; "
            "fi ;; esac; done < \"$m\"; rm -f -- \"$m\"; fi; } 9>>\"$m.lock\"; fi")


@dataclass(frozen=True)
class HostRefused:
    """What the host's program said when it would not collect or place (nothing changed on the host); `unknown`:
    no answer came, or one that is not the program's (a timeout, too much output, a closed channel, garbage), so
    what the command changed is not known."""

    reason: str
    unknown: bool = False
    bad_entry: bool = False  # the tar itself was refused (its checksum, format or members): no host takes it


def _run(conn: Connection, host: Host, cmd: str, data: bytes, max_output: int) -> BytesResult | HostRefused:
    """The program's answer; a timeout, a closed channel or an answer past `max_output` is a refusal whose
    outcome is unknown (a lost link raises)."""
    try:
        return run_bytes(conn, host, cmd, data, timeout=TIMEOUT_S, max_output=max_output)
    except (CommandTimedOut, OutputTooLarge, ChannelFailed) as exc:
        return HostRefused(str(exc), unknown=True)


def _said(stderr: bytes, exited: int) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit {exited}"


def collect(conn: Connection, host: Host, venv: str, folders: list[str], limit: int,
            user: str = "") -> bytes | HostRefused:
    """A tar of the cache folders that exist (b"" tars nothing when none does); refused above `limit` bytes. As
    `user` (the server's) where kcache.py runs as root, as every verb below."""
    cmd = command(venv, user, "collect", str(limit), *folders)
    res = _run(conn, host, cmd, b"", limit + (16 << 20))
    if isinstance(res, HostRefused):
        return res
    return res.stdout if res.exited == 0 else HostRefused(_said(res.stderr, res.exited))


def place(conn: Connection, host: Host, venv: str, data: bytes, sha256: str,
          folders: list[str], user: str = "") -> list[str] | HostRefused:
    """The tar put in place, each folder by rename; the folders placed, or why the host refused it. An answer
    naming anything but folders asked for is no answer (its outcome unknown): never a folder to clear later."""
    cmd = command(venv, user, f"--mark={PLACED}", "place", sha256, *folders)
    res = _run(conn, host, cmd, data, 1 << 20)
    if isinstance(res, HostRefused):
        return res
    if res.exited in (2, 4, 5, *NOT_RUN):  # refused, nothing changed: 4 the tar, 2 and 5 this host or these folders
        return HostRefused(_said(res.stderr, res.exited), bad_entry=res.exited == 4)
    if res.exited != 0:  # a crash: what it changed is not known
        return HostRefused(_said(res.stderr, res.exited), unknown=True)
    placed = res.stdout.decode("utf-8", "replace").splitlines()
    if not set(placed) <= set(folders):
        return HostRefused(f"its answer names no folder it was given ({placed[:1]!r:.80})", unknown=True)
    return placed


def clear(conn: Connection, host: Host, venv: str, folders: list[str], user: str = "") -> str | None:
    """The folders removed (renamed aside first); why not, or None."""
    cmd = command(venv, user, f"--mark={PLACED}", "clear", *folders)
    res = _run(conn, host, cmd, b"", 1 << 20)
    if isinstance(res, HostRefused):
        return res.reason
    return None if res.exited == 0 else _said(res.stderr, res.exited)


def unproven(conn: Connection, host: Host, venv: str, user: str = "") -> list[str] | HostRefused:
    """The folders a place filled and no start served with (the mark's) removed; those removed."""
    cmd = command(venv, user, f"--mark={PLACED}", "unproven")
    res = _run(conn, host, cmd, b"", 1 << 20)
    if isinstance(res, HostRefused):
        return res
    if res.exited != 0:
        return HostRefused(_said(res.stderr, res.exited), unknown=res.exited not in (5, *NOT_RUN))
    return res.stdout.decode("utf-8", "replace").splitlines()


def modules(conn: Connection, host: Host, venv: str, folders: list[str],
            user: str = "") -> dict[str, str] | HostRefused:
    """The sha256 of every compiled module (.so) in the folders, by path."""
    cmd = command(venv, user, f"--mark={PLACED}", "modules", *folders)
    res = _run(conn, host, cmd, b"", 4 << 20)
    if isinstance(res, HostRefused):
        return res
    if res.exited != 0:
        return HostRefused(_said(res.stderr, res.exited))
    return parse_modules(res.stdout.decode("utf-8", "replace"))


def parse_modules(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        digest, _, path = line.partition(" ")
        if len(digest) == 64 and path.startswith("/"):
            out[path] = digest
    return out
