"""What `inv tune --slo` learned per hardware fingerprint, playbook and promise (`.fleet/slo-learned.json`), so that
every host of the same fingerprint starts from it: the winner each host found (its flags and the request rate it
kept) and the values whose start crashed there. The next search of that fingerprint, playbook and promise starts
the best winner right after the base and never starts a value that crashed; `inv learned` shows them.

FLEET_STATE_DIR overrides `.fleet`. A write re-reads the file under a lock across threads and processes, changes
only its own entry, and renames a temporary file over the old one.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleet import site
from fleet.deploy.trials import Trial
from fleet.playbook import FlagValue

VERSION = 1
_LOCK = threading.Lock()


def path() -> Path:
    return site.find().state / "slo-learned.json"


@dataclass(frozen=True)
class HostWin:
    host: str
    flags: Mapping[str, FlagValue]
    rate: float  # requests per second kept under the promise
    release: str
    at: str


@dataclass(frozen=True)
class SloLearned:
    """One fingerprint, playbook and promise: each host's winner, and what crashed."""

    key: str  # the fingerprint's key
    playbook: str
    promise: str
    wins: tuple[HostWin, ...]
    crashed: tuple[tuple[str, FlagValue], ...]  # values whose start crashed and never served there

    def best(self) -> HostWin | None:
        return max(self.wins, key=lambda w: w.rate) if self.wins else None

    def to_json(self) -> dict[str, Any]:
        return {"fingerprint": self.key, "playbook": self.playbook, "slo": self.promise,
                "wins": [{"host": w.host, "flags": dict(w.flags), "rate": w.rate, "release": w.release, "at": w.at}
                         for w in self.wins], "crashed": [[f, v] for f, v in self.crashed]}


def _entry_key(fp: str, playbook: str, promise: str) -> str:
    return f"{fp}/{playbook}/{promise}"


def _scalar(v: object) -> bool:
    return isinstance(v, (str, int, float, bool))


def _parse(data: Mapping[str, Any]) -> SloLearned:
    wins = tuple(HostWin(str(w["host"]), {str(k): v for k, v in dict(w["flags"]).items() if _scalar(v)},
                         float(w["rate"]), str(w["release"]), str(w["at"])) for w in data["wins"])
    crashed = tuple((str(f), v) for f, v in data["crashed"] if _scalar(v))
    return SloLearned(str(data["fingerprint"]), str(data["playbook"]), str(data["slo"]), wins, crashed)


def load() -> list[SloLearned]:
    """Every entry that reads as one (a broken file or entry reads as nothing learned)."""
    try:
        data = json.loads(path().read_text())
        entries = data["entries"] if isinstance(data, dict) and data.get("version") == VERSION else {}
    except (OSError, ValueError, KeyError):
        return []
    out = []
    for entry in entries.values() if isinstance(entries, dict) else ():
        try:
            out.append(_parse(entry))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def lookup(fp: str, playbook: str, promise: str) -> SloLearned | None:
    return next((e for e in load() if (e.key, e.playbook, e.promise) == (fp, playbook, promise)), None)


def _locked() -> AbstractContextManager[None]:
    """One writer of slo-learned.json at a time (fleet.site.one_writer)."""
    return site.one_writer(path(), _LOCK)


def remember(fp: str, playbook: str, promise: str, host: str, winner: Trial | None, rate: float | None,
             release: str, crashed: Sequence[tuple[str, FlagValue]]) -> SloLearned:
    """Add a host's search to its fingerprint's entry: its winner (replacing the host's earlier one) and the
    values that crashed (added to the entry's). Returns the entry as written."""
    with _locked():
        entries = {_entry_key(e.key, e.playbook, e.promise): e for e in load()}
        k = _entry_key(fp, playbook, promise)
        old = entries.get(k) or SloLearned(fp, playbook, promise, (), ())
        wins = tuple(w for w in old.wins if w.host != host)
        if winner is not None and rate is not None:
            at = datetime.now(UTC).isoformat(timespec="seconds")
            wins += (HostWin(host, winner.as_dict(), rate, release, at),)
        bad = tuple(dict.fromkeys([*old.crashed, *crashed]))
        entries[k] = SloLearned(fp, playbook, promise, wins, bad)
        target = path()
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps({"version": VERSION, "entries": {n: e.to_json() for n, e in entries.items()}},
                                  indent=2) + "\n")
        os.replace(tmp, target)
        return entries[k]


def forget(hosts: frozenset[str], playbook: str | None, fp: str | None, dry_run: bool = False) -> list[SloLearned]:
    """Clear what the selection names (empty sets and None: everything): the selected hosts' winners (an entry
    left with neither winners nor crashes goes; with no host named, the whole entry). Returns what went, each
    entry as far as it went; the file before is kept as slo-learned.json.bak."""
    with _locked():
        entries = load()
        gone: list[SloLearned] = []
        kept: list[SloLearned] = []
        for e in entries:
            if (playbook is not None and e.playbook != playbook) or (fp is not None and e.key != fp):
                kept.append(e)
                continue
            if not hosts:
                gone.append(e)
                continue
            mine = tuple(w for w in e.wins if w.host in hosts)
            if mine:
                gone.append(SloLearned(e.key, e.playbook, e.promise, mine, ()))
            kept.append(SloLearned(e.key, e.playbook, e.promise, tuple(w for w in e.wins if w.host not in hosts),
                                   e.crashed))
        if dry_run or not gone:
            return gone
        target = path()
        backup = target.with_name(target.name + ".bak")
        tmp = backup.with_name(f".{backup.name}.{os.getpid()}")
        tmp.write_bytes(target.read_bytes())
        os.replace(tmp, backup)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps({"version": VERSION, "entries": {
            _entry_key(e.key, e.playbook, e.promise): e.to_json() for e in kept if e.wins or e.crashed}},
            indent=2) + "\n")
        os.replace(tmp, target)
        return gone
