"""The controller's store of hosts' compile and tune caches, one entry per cache key (issue 49): STATE/kcache/<key
digest>/{key.json, cache.tar, meta.json (its sha256, giver, and the giver's cold phases)}. An entry is written whole
or not at all (a folder built beside the others, renamed in), never replaced (the first host of a key gives it; one
that failed a start is dropped), bounded in size (the least recently used dropped first; none stored that would eat
into its disk's reserve: the controller's state shares that disk), dropped with the last release that needs it
(STORE/needs.json: fleet.deploy.cacheneeds), and read back only when its key.json is the key
asked for and its tar's sha256 is the one recorded: anything else is dropped and reported, never placed."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from fleet import site
from fleet.deploy.cachekey import CacheKey
from fleet.deploy.cacheneeds import Needs
from fleet.logs.warmphases import NONE, PhaseTimes

LIMIT = 2 << 30  # bytes one entry may hold (it passes through the controller's memory)
TOTAL = 32 << 30  # bytes the store may hold; the oldest entries go first
_TMP = ".tmp-"


def reserve(size: int) -> int:
    """Bytes of the store's disk (`size` bytes in all) no entry may take: the controller's state shares it. A tenth
    of it, at least a quarter of it or 1 GiB, whichever is less."""
    return max(size // 10, min(size // 4, 1 << 30))
_DIGEST = re.compile(r"[0-9a-f]{64}")  # an entry's folder: its key's digest


@dataclass(frozen=True)
class Entry:
    key: CacheKey
    data: bytes
    sha256: str
    host: str  # the host that gave it
    phases: PhaseTimes = NONE  # the giver's cold start, phase by phase (none in an entry from before)


@dataclass(frozen=True)
class Refused:
    reason: str


@dataclass(frozen=True)
class Stored:
    """An entry as the store lists it, without reading its tar."""

    digest: str
    key: CacheKey | None  # None: its key.json does not read as a key
    size: int
    used: float  # last placed or stored (seconds since the epoch)
    host: str  # the host that gave it


class CacheStore:
    def __init__(self, root: Path, limit: int = LIMIT, total: int = TOTAL) -> None:
        self.root, self.limit, self.total = root, limit, total
        self.needs = Needs(root / "needs.json")

    @classmethod
    def of_site(cls) -> CacheStore:
        """The store in the site's state folder (.fleet/kcache, or FLEET_STATE_DIR's)."""
        return cls(site.find().state / "kcache")

    def _dir(self, key: CacheKey) -> Path:
        return self.root / key.digest

    def has(self, key: CacheKey) -> bool:
        return (self._dir(key) / "meta.json").is_file()

    def put(self, key: CacheKey, data: bytes, host: str, phases: PhaseTimes = NONE) -> Entry | Refused:
        """Store a host's caches under `key` (`phases`: its cold start's, what a warm start is judged against); the
        entry already there is kept."""
        if len(data) > self.limit:
            return Refused(f"{len(data)} bytes, more than the {self.limit} an entry may hold")
        final = self._dir(key)
        digest = hashlib.sha256(data).hexdigest()
        if final.exists():
            return self.get(key) or Refused("an entry of this key is already stored")
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # compiled code and the key's flags: the controller's user's only
        disk = shutil.disk_usage(self.root)
        if disk.free - len(data) < reserve(disk.total):
            return Refused(f"the controller's disk would keep less than {reserve(disk.total) >> 20} MiB free "
                           f"({disk.free >> 20} MiB free now, {len(data) >> 20} MiB to store)")
        tmp = self.root / f"{_TMP}{key.digest[:16]}-{os.getpid()}-{time.monotonic_ns()}"
        with self._writing(fcntl.LOCK_SH):  # no sweep of temporaries while this one is written
            tmp.mkdir(mode=0o700)
            try:
                _write(tmp / "key.json", json.dumps(key.to_json(), sort_keys=True).encode())
                _write(tmp / "cache.tar", data)
                meta = {"sha256": digest, "size": len(data), "host": host, "stored": time.time(),
                        "phases": phases.to_json()}
                _write(tmp / "meta.json", json.dumps(meta, sort_keys=True).encode())
                os.rename(tmp, final)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                if not final.exists():
                    raise
        self.prune(keep=key)
        got = self.get(key)
        return got if isinstance(got, Entry) else Refused("the stored entry did not read back")

    def get(self, key: CacheKey) -> Entry | Refused | None:
        """The entry of `key`, None when there is none; Refused (and dropped) when it is not whole or not this
        key's."""
        folder = self._dir(key)
        if not folder.is_dir():
            return None
        try:
            meta = json.loads((folder / "meta.json").read_text())
            stored_key = CacheKey.from_json(json.loads((folder / "key.json").read_text()))
            data = (folder / "cache.tar").read_bytes()
        except (OSError, ValueError) as exc:
            return self._drop(folder, f"unreadable entry ({exc})")
        if stored_key != key:
            return self._drop(folder, "its key.json is another key's")
        if not isinstance(meta, dict) or hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            return self._drop(folder, "its tar's sha256 is not the one recorded (truncated or altered)")
        try:
            os.utime(folder / "meta.json")  # last used: the store drops the least recently used first
        except OSError:  # dropped meanwhile (another deploy's prune): there is none now
            return None
        return Entry(key, data, str(meta["sha256"]), str(meta.get("host", "")),
                     PhaseTimes.from_json(meta.get("phases")))

    def drop(self, key: CacheKey, reason: str) -> Refused:
        """The entry of `key` removed (a start with it failed and one without it served)."""
        return self._drop(self._dir(key), reason)

    def _drop(self, folder: Path, reason: str) -> Refused:
        aside = folder.with_name(f"{_TMP}drop-{folder.name}-{time.monotonic_ns()}")
        try:
            os.rename(folder, aside)
            shutil.rmtree(aside, ignore_errors=True)
        except OSError:
            pass
        return Refused(reason)

    def entries(self) -> list[Stored]:
        """Every entry, least recently used first (one not whole counts as used never, with no key; one being
        written or dropped is left out)."""
        out = []
        for folder in sorted(self.root.iterdir()) if self.root.is_dir() else ():
            if not _DIGEST.fullmatch(folder.name) or not folder.is_dir():
                continue  # needs.json, a temporary or dropped folder
            meta, key = _read(folder / "meta.json"), _read(folder / "key.json")
            try:
                stored: CacheKey | None = CacheKey.from_json(key)
            except ValueError:
                stored = None
            host = meta.get("host") if isinstance(meta, dict) else None
            out.append(Stored(folder.name, stored, _stat(folder / "cache.tar").st_size,
                              _stat(folder / "meta.json").st_mtime if isinstance(meta, dict) else 0.0,
                              host if isinstance(host, str) else ""))
        return sorted(out, key=lambda e: (e.used, e.digest))

    def over_bound(self, keep: CacheKey | None = None, without: Collection[str] = ()) -> list[Stored]:
        """The least recently used entries to drop until the store holds at most `total` bytes (`keep` never),
        once the entries `without` names (digests) are gone."""
        entries = [e for e in self.entries() if e.digest not in without]
        used = sum(e.size for e in entries)
        doomed = []
        for e in entries:
            if used <= self.total:
                break
            if keep is None or e.digest != keep.digest:
                doomed.append(e)
                used -= e.size
        return doomed

    def unneeded(self) -> list[Stored] | None:
        """The entries no release kept on any host needs (needs.json); None when that is unknown."""
        needed = self.needs.needed()
        return None if needed is None else [e for e in self.entries() if e.digest not in needed]

    @contextlib.contextmanager
    def _writing(self, how: int, wait: bool = True) -> Iterator[bool]:
        """The store's lock (.lock): shared by each put while it writes its temporary folder, exclusive for a
        sweep of the temporaries; True when held (`wait` False: not waited for)."""
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, how if wait else how | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def sweep(self) -> None:
        """The temporary folders a put or drop that was killed left (up to an entry's size each) removed, when no
        put is writing one."""
        if not self.root.is_dir():
            return
        with self._writing(fcntl.LOCK_EX, wait=False) as alone:
            for folder in self.root.iterdir() if alone else ():
                if folder.name.startswith(_TMP):
                    shutil.rmtree(folder, ignore_errors=True)

    def prune(self, keep: CacheKey | None = None) -> list[str]:
        """The least recently used entries dropped until the store holds at most `total` bytes (`keep` never);
        their digests. What killed puts and drops left is removed first."""
        self.sweep()
        return self.drop_all(self.over_bound(keep), "pruned: over the store's bound")

    def releases_kept(self, host: str, kept: dict[str, str | None]) -> list[str]:
        """`host`'s releases were pruned and these are kept (id -> the key digest each recorded): the entries
        no kept release needs any more dropped; their digests."""
        if not self.needs.kept(host, kept):
            return []  # needs.json was not fleet's (set aside): what the other hosts keep is not known now
        return self.drop_all(self.unneeded() or [], "pruned: no release kept needs it")

    def drop_all(self, entries: list[Stored], reason: str) -> list[str]:
        for e in entries:
            self._drop(self.root / e.digest, reason)
        return [e.digest for e in entries]


def _read(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _stat(path: Path) -> os.stat_result:
    try:
        return path.stat()
    except OSError:
        return os.stat_result((0,) * 10)


def _write(path: Path, data: bytes) -> None:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
