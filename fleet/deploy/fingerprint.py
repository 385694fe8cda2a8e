"""Hardware fingerprints, and the known-good rung remembered per fingerprint and playbook.

A fingerprint is what decides which rung serves best: GPU model, count, SM, interconnect, driver and the
installed package versions. `inv tune` records the winner (and the rungs that failed) in
`.fleet/known-good.json` (FLEET_STATE_DIR overrides `.fleet`); deploy on a host with the same fingerprint
tries the winner first and skips rungs known to crash there (slow ones stay as fallbacks). A remembered
rung counts only while its flags in the playbook are still the ones that were tuned. Only failures the
hardware and versions cause are learned (with the hosts that saw them); one host falling back on a hang or
a host-local failure never moves the known winner for every identical host.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleet import site
from fleet.host.facts import HostFacts
from fleet.outcomes import Outcome
from fleet.playbook import Playbook, Rung, merged_flags, sglang_version
from fleet.upstream.versions import version_key

# The failures the hardware and versions cause: recorded per rung with the hosts that saw them and how often,
# and the rung skipped for its fingerprint. Every other outcome (a hang, a full disk, a network blip, an
# interrupted run, another node's failure) is of one host or one moment and is never recorded.
_HARDWARE = {"ARCH_UNSUPPORTED", "TMA_FAILURE", "AUTOTUNE_FAILURE", "NO_KERNEL_IMAGE", "ILLEGAL_ADDRESS",
             "CUDA_GRAPH_FAILURE", "P2P_UNAVAILABLE", "KV_CACHE_TOO_SMALL", "CUDA_OOM", Outcome.WRONG_ANSWER}
# Recorded but never skipped: a slow rung is still a fallback should the winner stop serving.
_KEEP = {Outcome.PERF_REGRESSION}


def of(facts: HostFacts) -> dict[str, Any]:
    return {
        "gpu": sorted({g.name or "?" for g in facts.gpus}),
        "count": len(facts.gpus),
        "sm": sorted({g.sm for g in facts.gpus if g.sm}),
        "interconnect": facts.interconnect,
        "driver": facts.driver_version,
        "packages": {name: p.version for name, p in sorted(facts.packages.items()) if p.version},
    }


def key(fingerprint: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]


def path() -> Path:
    return site.find().state / "known-good.json"


def load() -> dict[str, Any]:
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    return data.get("entries", {}) if isinstance(data, dict) else {}


def sglang_versions() -> list[str]:
    """The sglang versions this site's hosts reported when a deploy or tune remembered them."""
    found = set()
    for entry in load().values():
        packages = entry.get("fingerprint", {}).get("packages", {}) if isinstance(entry, dict) else {}
        version = packages.get("sglang") if isinstance(packages, dict) else None
        if isinstance(version, str) and len(version) <= 40 and re.fullmatch(r"[0-9][0-9A-Za-z.+!_-]*", version):
            with suppress(ValueError):
                found.add(str(version_key(version)))  # PEP 440, normalised: '0.5.9-post1' is 0.5.9.post1
    return sorted(found, key=version_key)


def _flags(book: Playbook, rung: Rung, facts: HostFacts) -> dict[str, Any]:
    flags: dict[str, Any] = json.loads(json.dumps(merged_flags(book.flags, rung, sglang_version(facts))))
    return flags


def remember(book: Playbook, facts: HostFacts, winner: Rung, tok_s: float, host: str, release: str,
             attempts: list[dict[str, Any]], known_failed: dict[str, Any] | None = None,
             spread: float | None = None, served: str | None = None) -> str:
    """Record the winner and the failed rungs for this fingerprint and playbook . Returns the key.
    `known_failed`: failures recorded earlier, kept unless this run says otherwise; `served`: the rung that
    served this time (default the winner), whose failure record it clears."""
    with _locked():
        return _remember(book, facts, winner, tok_s, host, release, attempts, known_failed, spread, served)


def _remember(book: Playbook, facts: HostFacts, winner: Rung, tok_s: float, host: str, release: str,
              attempts: list[dict[str, Any]], known_failed: dict[str, Any] | None,
              spread: float | None, served: str | None) -> str:
    """remember() under the file lock: the file is read again here, so what other processes wrote stays."""
    served = served or winner.name
    fp = of(facts)
    k = key(fp)
    entries = load()
    failed = {name: bad for name, bad in (known_failed or {}).items() if name != served and isinstance(bad, dict)}
    failed = _sightings(book, facts, failed, [a for a in attempts if a["rung"] not in (winner.name, served)], host)
    entries[f"{k}/{book.name}"] = {
        "fingerprint": fp, "playbook": book.name, "rung": winner.name, "flags": _flags(book, winner, facts),
        "tok_s": tok_s, "spread": spread, "host": host, "release": release, "failed": failed,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps({"entries": entries}, indent=2) + "\n")
    os.replace(tmp, target)
    return k


def sighting(known: dict[str, Any] | None, outcome: str, flags: dict[str, Any], host: str) -> dict[str, Any]:
    """A rung's failure record with one more sighting: the count and hosts add up while the outcome and
    flags stay the same; anything else starts again (pure)."""
    if known and known.get("outcome") == outcome and known.get("flags") == flags:
        hosts = [h for h in known.get("hosts", []) if isinstance(h, str)][:32]
        seen: int = known["seen"] if type(known.get("seen")) is int else 1
        return {"outcome": outcome, "flags": flags, "seen": seen + 1, "hosts": sorted({*hosts, host})}
    return {"outcome": outcome, "flags": flags, "seen": 1, "hosts": [host]}


def _sightings(book: Playbook, facts: HostFacts, failed: dict[str, Any], attempts: list[dict[str, Any]],
               host: str) -> dict[str, Any]:
    """`failed` with this host's failures of the hardware (and slow rungs) added, one sighting each."""
    by_name = {r.name: r for r in book.ladder}
    out = dict(failed)
    for a in attempts:
        if a["rung"] in by_name and (a["outcome"] in _HARDWARE or a["outcome"] in _KEEP):
            out[a["rung"]] = sighting(out.get(a["rung"]), a["outcome"], _flags(book, by_name[a["rung"]], facts), host)
    return out


def counts(bad: dict[str, Any]) -> bool:
    """Whether a failure record skips its rung: a class the hardware and versions cause."""
    return bad.get("outcome") in _HARDWARE


_LEARNING = threading.Lock()


@contextmanager
def _locked() -> Iterator[None]:
    """One writer of known-good.json at a time, across threads and processes (flock on a file beside it): each
    reads the file again under the lock and changes only its own entry, so no update is lost."""
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with _LEARNING, open(target.with_name(f".{target.name}.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def learn(book: Playbook, facts: HostFacts, rung: Rung, host: str, release: str,
          attempts: list[dict[str, Any]]) -> str:
    """A deploy served on `rung` (a rolling deploy's host): remember it and the rungs that crashed before it
    for this fingerprint, so the next host with the same hardware starts there. What was known stays: earlier
    failures, and the tuned speed while the rung is the one that was tuned. Safe from several threads and
    processes at once."""
    with _locked():
        old = load().get(f"{key(of(facts))}/{book.name}") or {}
        known_failed: dict[str, Any] = old["failed"] if isinstance(old.get("failed"), dict) else {}
        failed = _sightings(book, facts, known_failed, [a for a in attempts if a["rung"] != rung.name], host)
        known = {r.name: r for r in book.ladder}.get(str(old.get("rung")))
        if (known is not None and known.name != rung.name and old.get("flags") == _flags(book, known, facts)
                and not counts(failed.get(known.name) or {})):
            # one host fell back: the known winner and its speed stay until its failure here counts
            return _remember(book, facts, known, float(old.get("tok_s") or 0.0), str(old.get("host")),
                             str(old.get("release")), [], failed, old.get("spread"), rung.name)
        same = old.get("rung") == rung.name and old.get("flags") == _flags(book, rung, facts)
        return _remember(book, facts, rung, float(old.get("tok_s") or 0.0) if same else 0.0, host, release,
                         [], failed, old.get("spread") if same else None, None)


def arrange(book: Playbook, facts: HostFacts, rungs: list[Rung],
            say: Callable[[str], None]) -> tuple[list[Rung], list[tuple[str, str]]]:
    """The rungs with the remembered winner first and known failures left out ((rung, why) for each)."""
    fp = of(facts)
    entry = load().get(f"{key(fp)}/{book.name}")
    if not entry:
        return rungs, []
    skipped: list[tuple[str, str]] = []
    kept: list[Rung] = []
    for rung in rungs:
        bad = entry.get("failed", {}).get(rung.name)
        if (rung.name != entry.get("rung") and isinstance(bad, dict) and counts(bad)
                and bad.get("flags") == _flags(book, rung, facts)):
            why = (f"known to fail on this hardware ({bad['outcome']}, seen {bad.get('seen', 1)}x on "
                   f"{', '.join(map(str, bad.get('hosts') or [entry.get('host')]))[:200]}, fingerprint {key(fp)})")
            say(f"rung {rung.name}: {why}")
            skipped.append((rung.name, why))
        else:
            kept.append(rung)
    first = [r for r in kept if r.name == entry.get("rung") and entry.get("flags") == _flags(book, r, facts)]
    if first:
        speed = f"{entry['tok_s']:,.0f} tok/s on" if entry.get("tok_s") else "served on"
        say(f"rung {first[0].name}: known-good on this hardware ({speed} "
            f"{entry.get('host')}, fingerprint {key(fp)}): trying it first")
        kept = first + [r for r in kept if r is not first[0]]
    return kept, skipped
