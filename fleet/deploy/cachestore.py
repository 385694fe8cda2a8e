"""The controller's store of hosts' compile and tune caches, one entry per cache key (issue 49):
STATE/kcache/<key digest>/{key.json, cache.tar, meta.json}. An entry is written whole or not at all (a folder
built beside the others, renamed in), never replaced (the first host of a key gives it; one that failed a start
is dropped), bounded in size (the least recently used dropped first), and read back only when its key.json is
the key asked for and its tar's sha256 is the one recorded: anything else is dropped and reported, never
placed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from fleet.deploy.cachekey import CacheKey

LIMIT = 2 << 30  # bytes one entry may hold (it passes through the controller's memory)
TOTAL = 32 << 30  # bytes the store may hold; the oldest entries go first
_TMP = ".tmp-"


@dataclass(frozen=True)
class Entry:
    key: CacheKey
    data: bytes
    sha256: str
    host: str  # the host that gave it


@dataclass(frozen=True)
class Refused:
    reason: str


class CacheStore:
    def __init__(self, root: Path, limit: int = LIMIT, total: int = TOTAL) -> None:
        self.root, self.limit, self.total = root, limit, total

    def _dir(self, key: CacheKey) -> Path:
        return self.root / key.digest

    def has(self, key: CacheKey) -> bool:
        return (self._dir(key) / "meta.json").is_file()

    def put(self, key: CacheKey, data: bytes, host: str) -> Entry | Refused:
        """Store a host's caches under `key`; the entry already there is kept."""
        if len(data) > self.limit:
            return Refused(f"{len(data)} bytes, more than the {self.limit} an entry may hold")
        final = self._dir(key)
        digest = hashlib.sha256(data).hexdigest()
        if final.exists():
            return self.get(key) or Refused("an entry of this key is already stored")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f"{_TMP}{key.digest[:16]}-{os.getpid()}-{time.monotonic_ns()}"
        tmp.mkdir()
        try:
            _write(tmp / "key.json", json.dumps(key.to_json(), sort_keys=True).encode())
            _write(tmp / "cache.tar", data)
            meta = {"sha256": digest, "size": len(data), "host": host, "stored": time.time()}
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
        os.utime(folder / "meta.json")  # last used: the store drops the least recently used first
        return Entry(key, data, str(meta["sha256"]), str(meta.get("host", "")))

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

    def prune(self, keep: CacheKey | None = None) -> list[str]:
        """The least recently used entries dropped until the store holds at most `total` bytes (`keep` never);
        their digests."""
        entries = []
        for folder in self.root.iterdir() if self.root.is_dir() else ():
            if folder.name.startswith(_TMP) or not (folder / "cache.tar").is_file():
                continue
            used_at = (folder / "meta.json").stat().st_mtime if (folder / "meta.json").is_file() else 0.0
            entries.append((used_at, (folder / "cache.tar").stat().st_size, folder))
        used = sum(size for _, size, _ in entries)
        dropped = []
        for _, size, folder in sorted(entries):
            if used <= self.total:
                break
            if keep is not None and folder.name == keep.digest:
                continue
            self._drop(folder, "pruned")
            used -= size
            dropped.append(folder.name)
        return dropped


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
