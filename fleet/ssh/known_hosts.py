"""known_hosts as OpenSSH reads it (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"): plain and hashed (`|1|salt|hash`)
host entries, `[host]:port`, comma-separated patterns with `*`, `?` and `!` negation, and the two markers
paramiko cannot read (its loader raises InvalidHostKey on them):

    @revoked PATTERNS KEYTYPE BASE64          this key must never be accepted, for hosts matching PATTERNS
    @cert-authority PATTERNS KEYTYPE BASE64   host certificates signed by this key are trusted

fleet refuses a revoked key before it authenticates, and says in one line that host certificates are not
supported where only a @cert-authority line would vouch for a host. Lines that cannot be read are skipped,
as OpenSSH skips them.
"""

from __future__ import annotations

import functools
import re
import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from fleet.errors import FleetError
from fleet.ssh import filestamp


@dataclass(frozen=True)
class Marked:
    """A @revoked or @cert-authority line."""

    marker: str
    patterns: tuple[str, ...]
    key: str  # "KEYTYPE BASE64"
    where: str  # FILE:LINE


@dataclass(frozen=True)
class Entry:
    """A host key line: the hostnames field (names, patterns or hashes) and its key."""

    patterns: tuple[str, ...]
    key: paramiko.PKey
    where: str  # FILE:LINE


_LITERAL = re.compile(r"[^*?!|,\s]+")


@dataclass
class KnownHosts:
    entries: list[Entry] = field(default_factory=list)
    marked: list[Marked] = field(default_factory=list)
    # Built on first lookup: entries whose names are all literal, by name, and the rest (patterns, hashed
    # names) in file order. A fleet looks up every host once in the same files: without it each lookup
    # scans every line, N hosts x N lines.
    _index: tuple[dict[str, list[int]], list[int]] | None = field(default=None, init=False, repr=False,
                                                                   compare=False)

    def _candidates(self, hostname: str) -> list[Entry]:
        """The entries that may match hostname, in file order (only they need the full match)."""
        if self._index is None:
            by_name: dict[str, list[int]] = {}
            rest: list[int] = []
            for i, e in enumerate(self.entries):
                if all(_LITERAL.fullmatch(p) for p in e.patterns):
                    for p in set(e.patterns):
                        by_name.setdefault(p, []).append(i)
                else:
                    rest.append(i)
            self._index = (by_name, rest)
        by_name, rest = self._index
        return [self.entries[i] for i in sorted(by_name.get(hostname, []) + rest)]

    def revoked(self, hostname: str, key: paramiko.PKey) -> str | None:
        """Where the line that revokes this key for this host is, or None."""
        kid = f"{key.get_name()} {key.get_base64()}"
        return next((m.where for m in self.marked if m.marker == "revoked" and m.key == kid
                     and matches(m.patterns, hostname)), None)

    def authority_for(self, hostname: str) -> str | None:
        """Where a @cert-authority entry whose patterns cover this host is, or None."""
        return next((m.where for m in self.marked if m.marker == "cert-authority" and matches(m.patterns, hostname)),
                    None)

    def keys_for(self, hostname: str) -> dict[str, paramiko.PKey]:
        """The host's known keys by type (the first line of each type wins, as in OpenSSH's file order), under
        its `[host]:port` name for a port other than 22; revoked ones left out."""
        found: dict[str, paramiko.PKey] = {}
        for e in self._candidates(hostname):
            kind = e.key.get_name()
            if kind not in found and matches(e.patterns, hostname) and self.revoked(hostname, e.key) is None:
                found[kind] = e.key
        return found

    def shared(self, hostname: str, key: paramiko.PKey) -> str | None:
        """The pattern of the line that vouches for this host's key where it covers other hosts too (`10.1.230.*`,
        `gpu-?`): `ssh-keygen -R HOST` drops such a line for all of them. None for a line naming hosts alone."""
        entry = next((e for e in self._candidates(hostname) if e.key == key and matches(e.patterns, hostname)), None)
        return ",".join(entry.patterns) if entry and not all(_LITERAL.fullmatch(p) for p in entry.patterns) and not \
            all(p.startswith("|1|") for p in entry.patterns) else None

    def how_to_remove(self, hostname: str, key: paramiko.PKey, line: str | None) -> str:
        """What to do with the line (FILE:N) that has the host's old key, its key changed."""
        shared = self.shared(hostname, key)
        if line and shared:  # the advice was `ssh-keygen -R HOST`, which drops the line for every host it covers
            return (f"edit that line by hand: its pattern {shared} vouches for other hosts too, which `ssh-keygen -R` "
                    "would drop with it")
        return (f"remove that line (`ssh-keygen -R {shlex.quote(hostname)} -f {shlex.quote(line.rsplit(':', 1)[0])}`)"
                if line else "remove its old entry")

    def known_as(self, key: paramiko.PKey) -> list[str]:
        """The lines that hold this very key for other names, `FILE:N (names)`: what ssh's prompt says of an unknown
        key (`This host key is known by the following other names/addresses`), a host named otherwise in known_hosts
        (`ssh gpu-node-1`) than in the inventory (its address)."""
        return [f"{e.where} (" + ("a hashed name" if all(p.startswith("|1|") for p in e.patterns) else
                                  ",".join(e.patterns)) + ")" for e in self.entries if e.key == key]

    def where(self, hostname: str, key: paramiko.PKey) -> str | None:
        """The line that vouches for this host's key, for `-v`."""
        return next((e.where for e in self._candidates(hostname) if e.key == key and matches(e.patterns, hostname)),
                    None)

    def __add__(self, other: KnownHosts) -> KnownHosts:
        return KnownHosts(self.entries + other.entries, self.marked + other.marked)


def other_names_said(lines: list[str]) -> str:
    """', which known_hosts has for another name: FILE:N (gpu-node-1); ...', or '' where no line has the key."""
    if not lines:
        return ""
    more = f" and {len(lines) - 3} more" if lines[3:] else ""
    return (f", which known_hosts has for another name: {', '.join(lines[:3])}{more}; the same host named "
            "otherwise (or a clone of its image)? re-run with --accept-new-host-keys to record it under this name too")


def host_key_file(key_type: str) -> str:
    """Where sshd keeps a host key of this type, for `ssh-keygen -lf` on the host's console."""
    kind = "ed25519" if "ed25519" in key_type else "ecdsa" if "ecdsa" in key_type else "rsa"
    return f"/etc/ssh/ssh_host_{kind}_key.pub"


def matches(patterns: tuple[str, ...], hostname: str) -> bool:
    """OpenSSH's match of a host against a known_hosts hostnames field: any positive pattern (or hashed
    name) matches and no negated one does."""
    hit = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern[1:] if negated else pattern
        if pattern.startswith("|1|"):
            salt = pattern.split("|")[2]
            ok = paramiko.HostKeys.hash_host(hostname, salt) == pattern
        else:
            ok = _glob(pattern).fullmatch(hostname) is not None
        if ok and negated:
            return False
        hit = hit or ok
    return hit


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    """OpenSSH's patterns: `*` and `?` only (brackets are literal, as in `[host]:port`)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


def parse(text: str, path: str = "known_hosts") -> KnownHosts:
    known = KnownHosts()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            fields = line.split()
            if len(fields) >= 4 and fields[0] in ("@revoked", "@cert-authority"):
                known.marked.append(Marked(fields[0][1:], tuple(fields[1].split(",")), f"{fields[2]} {fields[3]}",
                                           f"{path}:{number}"))
            continue  # an unknown marker: OpenSSH ignores the line too
        try:
            entry = HostKeyEntry.from_line(line, number)
        except (InvalidHostKey, ValueError, paramiko.SSHException):  # a key its type cannot read ('ssh-ed25519 AAAA'):
            continue  # skipped as OpenSSH skips it; it failed every host, `SSHException: Invalid key (class: ...`
        if entry is not None and entry.key is not None:
            known.entries.append(Entry(tuple(entry.hostnames), entry.key, f"{path}:{number}"))
    return known


_files: filestamp.PerContent[KnownHosts] = filestamp.PerContent(
    lambda path: parse(path.read_text(errors="replace"), str(path)))
_lock = threading.Lock()
_combined: dict[tuple[tuple[Path, filestamp.Stamp], ...], KnownHosts] = {}
_MISSING = (-1, -1)


def _stamped(path: Path, who: str = "") -> tuple[filestamp.Stamp, KnownHosts]:
    try:
        return _files.get(path)
    except FileNotFoundError:
        return _MISSING, KnownHosts()
    except OSError as exc:  # a folder, a file root cannot read: it was Python's `IsADirectoryError: [Errno 21] ...`
        said = f"{who}: " if who else ""
        raise FleetError(f"{said}known_hosts {path}: cannot be read ({exc.strerror or exc}): name the file itself "
                         "(the inventory's known_hosts: ~/.ssh/known_hosts, or ssh_config's UserKnownHostsFile)"
                         ) from None


def load(path: Path) -> KnownHosts:
    """The file parsed once per content (mtime, size): a fleet of N hosts would otherwise parse every key of
    the file N times, which costs more CPU than the SSH handshakes once the file is large."""
    return _stamped(path)[1]


def load_all(paths: Sequence[Path], who: str = "") -> KnownHosts:
    """Several files as OpenSSH reads them for one host (the user's files, then the global ones). The same
    files with the same contents give the same object, so its index is built once for a whole fleet."""
    parts = [(path, *_stamped(path, who)) for path in paths]  # who: the host it is read for, named in an error
    key = tuple((path, stamp) for path, stamp, _ in parts)
    with _lock:
        known = _combined.get(key)
        if known is None:
            known = KnownHosts()
            for _, _, part in parts:
                known = known + part
            if len(_combined) >= 64:  # a long-lived process (status --watch) whose files keep changing
                _combined.clear()
            _combined[key] = known
        return known
