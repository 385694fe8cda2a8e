"""Errors fleet reports to people, the exit codes they map to, and the "did you mean" every name lookup shares
(hosts, groups, playbooks): difflib's closest known name, the case of the letters aside, else the names known;
an option named with its value as the operator typed it (as_typed), and Ansible's range, its @FILE, a shell's
brace expansion and bash's kept `\\!` refused in one."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

# Exit codes every task documents: 0 all ok, 1 some host failed, 2 bad input (nothing was changed), 130 Ctrl-C.
EXIT_OK = 0
EXIT_HOST_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # Ctrl-C: the shell's own code for SIGINT (128 + 2)


class FleetError(Exception):
    """An error with a one-line message meant for the operator."""

    exit_code = EXIT_HOST_FAILED


class InputError(FleetError):
    """Bad input (inventory, playbook, flag): reported before any host is touched."""

    exit_code = EXIT_BAD_INPUT


class GuardError(InputError):
    """FLEET_SANDBOX_ONLY refused an address: no packet was sent."""


class NotReached(StrEnum):
    """Why a host was not reached, in the word every per-host row shows for it (probe, status, exec, deploy):
    only a host SSH could not reach is `unreachable`; one that answered and refused us says what it refused."""

    UNREACHABLE = "unreachable"  # no TCP connection, no SSH banner, or silence mid-read: the link, or a wedged host
    UNKNOWN_KEY = "unknown key"  # it offered a host key no known_hosts line vouches for
    CHANGED_KEY = "key changed"  # known_hosts has another key for it
    REFUSED_KEY = "key refused"  # its key is @revoked, or only a @cert-authority line vouches for it
    LOGIN = "login refused"  # no identity was accepted
    SUDO = "sudo refused"  # logged in, but `become` failed
    OTHER = "not reached"  # a name that does not resolve, a jump host that could not open the way


class ConnectError(FleetError):
    """A host could not be reached or refused us; the message says which and why, `cause` in a word. `unreachable`:
    SSH could not reach the host itself (timed out, refused, dropped before the SSH banner), not a host that answered
    and refused us (key, login), nor a jump host or a name that failed on the way; never by itself a reason to reset
    it."""

    def __init__(self, message: str, unreachable: bool = False, cause: NotReached | None = None) -> None:
        super().__init__(message)
        self.unreachable = unreachable
        self.cause = cause or (NotReached.UNREACHABLE if unreachable else NotReached.OTHER)


SHOWN = 12  # names listed in full where none is near; more are counted


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """ "; did you mean sbx1?" (SBX0 is sbx0), or nothing."""
    names = {k.lower(): k for k in known}
    near = difflib.get_close_matches(name.lower(), list(names), n=1, cutoff=0.6)
    return f"; did you mean {names[near[0]]}?" if near else ""


def known_names(known: Iterable[str]) -> str:
    """ " (known: a, b, c)", the first SHOWN of a long list and how many more."""
    names = sorted(known)
    listed = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
    return f" (known: {listed or 'none'})"


def hint(name: str, known: Iterable[str], flag: str | None = None) -> str:
    """did_you_mean where a name is near, else known_names. With `flag` (an option taking globs), a name that begins
    several is answered with the glob (`-H sbx`: it said `did you mean sbx3?`, one of four alike)."""
    names = list(known)
    begun = sorted(n for n in names if n.startswith(name) and n != name) if name else []
    if flag and len(begun) > 1:
        listed = ", ".join(begun[:SHOWN]) + (f" and {len(begun) - SHOWN} more" if len(begun) > SHOWN else "")
        return f"; did you mean {as_typed(flag, name + '*')}? ({len(begun)} begin so: {listed})"
    return did_you_mean(name, names) or known_names(names)


_PLAIN = re.compile(r"[\w@%+=:,./-]+", re.ASCII)  # what a shell reads as itself, unquoted (shlex.quote's set)


def as_typed(flag: str, value: str) -> str:
    """`--host '!a3'`: an option with its value as the operator typed it, quoted as a shell would need it again
    (text for a message: shlex stays in fleet.host and fleet.ssh, where commands are made)."""
    shown = value if _PLAIN.fullmatch(value) else "'" + value.replace("'", "'\"'\"'") + "'"
    return f"{flag} {shown}"


def as_given(hosts: Sequence[str], groups: Sequence[str], host_flag: str = "--host") -> str:
    """The selection's options as the operator typed them: `--host '!a1' --group pcie`."""
    return " ".join([*(as_typed(host_flag, h) for h in hosts), *(as_typed("--group", g) for g in groups)])


_RANGE = re.compile(r"\[(\w+):(\w+)\]")  # Ansible's `gpu[01:12]` (a range) or `group[0:2]` (a slice)


def pattern_of(flag: str, typed: str, what: str) -> str:
    """A --host/--group pattern without its `!`/`&`. InputError for an empty one, and for Ansible's `[1:3]`, naming
    the hosts it meant: as a glob it is the set {1, :, 3}, which took gpu1 and gpu3 and silently left out gpu2."""
    pattern = typed.lstrip("!&")
    if not pattern:
        raise InputError(f"{flag}: an empty {what} (a stray comma, or `!` alone?)")
    _shell_spelling(flag, typed)
    m = _RANGE.search(typed)
    if not m:
        return pattern
    lo, hi = m.groups()
    meant = ""
    if flag != "--group" and lo.isdigit() and hi.isdigit() and 0 <= int(hi) - int(lo) < 64:
        sign = typed[:len(typed) - len(typed.lstrip("!&"))]
        bare = typed[len(sign):]
        at = m.start() - len(sign)
        meant = ": " + as_typed(flag, ",".join(f"{sign}{bare[:at]}{str(i).zfill(len(lo))}{bare[at + len(m[0]):]}"
                                               for i in range(int(lo), int(hi) + 1)))
    raise InputError(f"{as_typed(flag, typed)}: [{lo}:{hi}] is Ansible's range (or a group's slice), not a glob, "
                     f"whose [...] is a set of characters{meant}")


_BRACES = re.compile(r"\{([^{}]*)\}")  # a shell's `gpu{1,3}` or `gpu{01..12}`


def _shell_spelling(flag: str, typed: str) -> None:
    """InputError for what a shell or Ansible hand types that fleet takes as a name: bash's `\\!a` (it keeps the
    backslash before `!` inside double quotes), a brace expansion the shell left quoted, Ansible's `@FILE`. Each was
    answered with a nearest name the pattern never meant (`\\!a`: did you mean a?, the host it meant to spare)."""
    if typed.startswith("\\!") and typed[2:]:
        raise InputError(f"{as_typed(flag, typed)}: a backslash before `!` is kept as typed (bash keeps it inside "
                         f"double quotes); to leave {typed[2:]} out: {as_typed(flag, typed[1:])} (single quotes)")
    if typed.startswith("@") and typed[1:]:
        raise InputError(f"{as_typed(flag, typed)}: Ansible's --limit @FILE (a file of host names) is not read; name "
                         f'the hosts, joined with commas: {flag} "$(paste -sd, {typed[1:]})"')
    m = _BRACES.search(typed)
    if not m:
        return
    seq = re.fullmatch(r"(\d+)\.\.(\d+)", m[1])
    if seq and 0 <= int(seq[2]) - int(seq[1]) < 64:
        items = [str(i).zfill(len(seq[1])) for i in range(int(seq[1]), int(seq[2]) + 1)]
    elif "," in m[1]:
        items = m[1].split(",")
    else:
        return
    sign = typed[:len(typed) - len(typed.lstrip("!&"))]
    meant = ",".join(f"{sign}{typed[len(sign):m.start()]}{item}{typed[m.end():]}" for item in items)
    raise InputError(f"{as_typed(flag, typed)}: {m[0]} is the shell's brace expansion, which a shell does only "
                     f"unquoted; the hosts it meant: {as_typed(flag, meant)}")


def ansible_spelling(pattern: str, flag: str, hosts: Mapping[str, str], groups: Iterable[str]) -> str:
    """What fleet says to Ansible's `--limit 'a:!b'`, `~regex`, `all`, a shell's list (`'a b'`, `a;b`) and ssh's
    `host:22`, in place of a nearest name that pattern never meant ('': none). `hosts`: name to address."""
    if pattern == "all":
        return "; every host is --all (a task that only reads takes the inventory's hosts without --host)"
    if pattern.startswith("~"):
        return f"; fleet takes globs, not Ansible's ~regex: {as_typed(flag, 'gpu-[12]')}, {as_typed(flag, 'gpu-*')}"
    host, _, port = pattern.rpartition(":")
    if port.isdigit() and (host in hosts or host in hosts.values()):
        return f"; a port is no part of a host's pattern (the inventory's port: is): {as_typed(flag, host)}"
    groups = set(groups)
    for join, named in ((":", "Ansible's ':'"), (";", "';'"), ("|", "'|'"), (None, "spaces")):
        parts = pattern.split(join)
        if len(parts) > 1 and all(parts):
            said = " ".join(as_typed("--group" if p.lstrip("!&") in groups else "--host" if flag == "--group"
                                     and p.lstrip("!&") in hosts else flag, p) for p in parts)
            return f"; patterns are given one to an option, or joined with commas, not with {named}: {said}"
    return ""
