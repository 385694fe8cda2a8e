"""Which releases need which entry of the controller's cache store (issue 49): STORE/needs.json, for each host
the releases it keeps and the digest of the key each one's server started under.

A release is added when an attempt of it starts with a key, before the store is read or written, so a prune
after another host's deploy never drops an entry a deploy under way uses. A host's part is replaced by the
releases it keeps each time its releases are pruned. A host is never left out for not being in the inventory
any more: its releases, as last seen, still count (the store's size bound drops what nobody uses). A file that
is not one fleet wrote counts as unknown: nothing is dropped for want of a release then.

    {"version": 1, "hosts": {"sbx0": {"20261205T101500Z-ab12": "<sha256 of the key>", ...}, ...}}
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fleet import site

VERSION = 1
_LOCK = threading.Lock()
_DIGEST = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.:-]{0,253}")  # a host's name, a release's id

Hosts = dict[str, dict[str, str]]  # host -> release id -> key digest


@dataclass(frozen=True)
class Need:
    host: str
    release: str
    digest: str


class Needs:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[Need] | None:
        """Every release that needs an entry (none when nothing was recorded); None when the file is not one fleet
        wrote."""
        hosts = self._hosts()
        if hosts is None:
            return None
        return [Need(h, r, d) for h, releases in sorted(hosts.items()) for r, d in sorted(releases.items())]

    def needed(self) -> frozenset[str] | None:
        """The digests some kept release needs; None when unknown (see read)."""
        got = self.read()
        return None if got is None else frozenset(n.digest for n in got)

    def started(self, host: str, release: str, digest: str | None) -> None:
        """An attempt of `release` on `host` starts under this key (None: under none)."""
        def change(hosts: Hosts) -> None:
            mine = hosts.setdefault(host, {})
            if digest is None:
                mine.pop(release, None)
            else:
                mine[release] = digest
        self._change(change)

    def kept(self, host: str, releases: Mapping[str, str | None]) -> bool:
        """The releases `host` keeps now (id -> the digest each recorded, None for none), in place of its part;
        False when the file was not fleet's (see _change)."""
        def change(hosts: Hosts) -> None:
            hosts[host] = {r: d for r, d in releases.items() if d is not None}
        return self._change(change)

    def _change(self, change: Callable[[Hosts], None]) -> bool:
        """`change` made to the hosts' parts under the lock; False when the file was not fleet's: it is set aside
        (needs.json.bad) and begun again, and until every host's releases were pruned again, an entry only the lost
        part named may be dropped (its key's next host starts cold once)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)  # the store's folder: private from its first write (compiled code, flags)
        with site.one_writer(self.path, _LOCK):
            hosts, whole = self._hosts(), True
            if hosts is None:
                os.replace(self.path, self.path.with_name(self.path.name + ".bad"))
                hosts, whole = {}, False
            change(hosts)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
            text = json.dumps({"version": VERSION, "hosts": {h: r for h, r in hosts.items() if r}}, indent=1,
                              sort_keys=True)
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(text)
            os.chmod(tmp, 0o600)  # a temporary a killed writer left (the umask's) is replaced, never kept as it was
            os.replace(tmp, self.path)
        return whole

    def _hosts(self) -> Hosts | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return None
        return _parse(data)


def _parse(data: object) -> Hosts | None:
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("hosts"), dict):
        return None
    out: Hosts = {}
    for host, releases in data["hosts"].items():
        if not _NAME.fullmatch(host) or not isinstance(releases, dict):
            return None
        for rid, digest in releases.items():
            if not isinstance(rid, str) or not _NAME.fullmatch(rid) or not isinstance(digest, str) \
                    or not _DIGEST.fullmatch(digest):
                return None
        out[host] = dict(releases)
    return out
