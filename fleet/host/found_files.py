"""What stood at each path fleet manages before its first write there (/var/lib/fleet/before-fleet/): a copy and
its sha256 and mode, or that nothing did; `inv rollback --to before-fleet` puts it back (fleet.deploy.before_fleet).
"""

from __future__ import annotations

import json
import shlex
from typing import TypedDict

from fabric import Connection

from fleet.host.releases import BEFORE_FLEET, MANAGED_MARK, HostFiles, _Direct, file_key, now
from fleet.host.service import sha256 as sha256_of
from fleet.inventory import Host


class BeforeFleetFile(TypedDict, total=False):
    """What stood at one path before fleet's first write there: nothing (`absent`), or a copy's sha256 and mode."""

    absent: bool
    sha256: str
    mode: str


class BeforeFleet:
    """What stood at each path fleet manages before its first write there: a copy, or that nothing did. A file
    that already carries fleet's header was written by a fleet that kept no record: unknown, never guessed."""

    def __init__(self, session: HostFiles, root: str = BEFORE_FLEET):
        """The record on `session`'s host, read and written through it."""
        self.session, self.host, self.root = session, session.host, root

    @classmethod
    def on(cls, session: HostFiles, root: str = BEFORE_FLEET) -> BeforeFleet:
        return cls(session, root)

    @classmethod
    def direct(cls, conn: Connection, host: Host, root: str = BEFORE_FLEET) -> BeforeFleet:
        """The record over `conn`, without a host session."""
        return cls(_Direct(conn, host), root)

    def manifest(self) -> dict[str, BeforeFleetFile]:
        raw = self.session.read(f"{self.root}/manifest.json")
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return data.get("files", {}) if isinstance(data, dict) else {}

    def note(self, path: str, old: bytes | None) -> None:
        """Record what fleet is about to replace at `path`, the first time only."""
        files = self.manifest()
        if path in files or (old is not None and old.startswith(MANAGED_MARK)):
            return
        mode = 0
        if old is not None:  # its mode, read as root on a become host (as the file was)
            out = self.session.sh(f"stat -c %a -- {shlex.quote(path)}").strip()
            mode = int(out, 8) & 0o7777 if out and all(c in "01234567" for c in out) else 0o600
        self.session.sh(f"mkdir -p -m 0700 {shlex.quote(self.root)}/files")
        if old is None:
            files[path] = {"absent": True}
        else:
            self.session.write_atomic(f"{self.root}/files/{file_key(path)}", old, 0o600)
            files[path] = {"sha256": sha256_of(old), "mode": oct(mode)}
        self.session.write_atomic(f"{self.root}/manifest.json",
                                  json.dumps({"files": files, "recorded": now()}, indent=2).encode(), 0o600)

    def copy(self, path: str) -> bytes | None:
        return self.session.read(f"{self.root}/files/{file_key(path)}")
