"""What an `inv tune --slo` search has measured so far, kept on the controller so that `inv tune` again resumes it
after Ctrl-C or a host lost mid-search (`.fleet/tune/<host>-<key>.json`; FLEET_STATE_DIR overrides `.fleet`).

A search resumes only where everything that decides its answer is the same: the host, its hardware fingerprint,
the playbook's bytes, the promise and the search space (flags and values); otherwise it starts afresh and says
why. Each trial is written when it has been measured (a temporary file renamed over the old one, so a Ctrl-C
mid-write leaves the one before); the file goes when the tune ends with a winner serving.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet import site
from fleet.deploy.guided import Seen
from fleet.deploy.searchspace import Space
from fleet.deploy.trials import Trial

VERSION = 1


def key(host: str, fingerprint: str, playbook_sha256: str, promise: str, space: Space) -> str:
    """A digest of everything that decides the search's answer."""
    dims = [[d.flag, [repr(v) for v in d.values]] for d in space.dimensions]
    text = json.dumps([host, fingerprint, playbook_sha256, promise, dims], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def path(host: str, digest: str, state: Path | None = None) -> Path:
    return (state or site.find().state) / "tune" / f"{host}-{digest}.json"


@dataclass(frozen=True)
class Journal:
    seen: tuple[Seen, ...]
    records: tuple[dict[str, Any], ...]  # the trials' records as --json gives them


def _seen_json(s: Seen) -> dict[str, Any]:
    return {"flags": [[k, v] for k, v in s.trial.flags], "rate": s.rate, "crashed": s.crashed, "full": s.full,
            "short": s.short}


def _seen_of(data: Any) -> Seen:
    flags = tuple((str(k), v) for k, v in data["flags"])
    if any(not isinstance(v, (str, int, float, bool)) for _, v in flags):
        raise ValueError("a flag value is not a scalar")
    rate, short = data["rate"], data["short"]
    for x in (rate, short):
        if x is not None and not (isinstance(x, (int, float)) and x > 0):
            raise ValueError(f"rate {x!r}")
    return Seen(Trial(flags), rate, bool(data["crashed"]), bool(data["full"]), short)


def load(file: Path, digest: str) -> tuple[Journal | None, str | None]:
    """(the journal, None), or (None, why not) when there is none or it cannot be used."""
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{file}: unreadable ({type(exc).__name__}); the search starts afresh"
    try:
        if data["version"] != VERSION or data["key"] != digest:
            return None, f"{file}: another search's; it starts afresh"
        seen = tuple(_seen_of(s) for s in data["seen"])
        records = tuple(dict(r) for r in data["records"])
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"{file}: not a tune journal ({type(exc).__name__}: {exc}); the search starts afresh"
    return Journal(seen, records), None


def save(file: Path, digest: str, seen: Sequence[Seen], records: Sequence[dict[str, Any]]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": VERSION, "key": digest, "seen": [_seen_json(s) for s in seen],
                               "records": list(records)}))
    os.replace(tmp, file)


def done(file: Path) -> None:
    file.unlink(missing_ok=True)
