"""Files read once per content: every host of a fleet looks up the same known_hosts, ssh_config and key
files, so each is parsed once and again only when its stamp (mtime, size) changes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
Stamp = tuple[int, int]


def stamp(path: str | Path) -> Stamp | None:
    """(mtime in ns, size), or None for a file that cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class PerContent(Generic[T]):
    """`parse(path)` remembered per path while the file's stamp stays the same."""

    def __init__(self, parse: Callable[[Path], T]):
        self._parse = parse
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[Stamp, T]] = {}

    def get(self, path: Path) -> tuple[Stamp, T]:
        """The file's stamp and its parsed value. Raises FileNotFoundError (or what parse raises), caching
        nothing."""
        st = path.stat()
        now = (st.st_mtime_ns, st.st_size)
        with self._lock:
            hit = self._seen.get(path)
        if hit is not None and hit[0] == now:
            return hit
        value = self._parse(path)
        with self._lock:
            self._seen[path] = (now, value)
        return now, value
