"""Hardware fingerprints, and what the fleet learned per fingerprint and playbook (`.fleet/known-good.json`).

A fingerprint is what decides which rung serves best: GPU model, count, SM, interconnect, P2P, virtualisation,
driver and the installed package versions. Deploys and tunes add their results to the fingerprint's evidence
(fleet.deploy.evidence: per rung, each host's serves, tok/s and failures), and deploy on a host with the same
fingerprint tries the winner first and skips rungs whose crash the evidence confirms (slow ones stay as
fallbacks). A remembered rung counts only while its flags in the playbook are still the ones it ran with.
FLEET_STATE_DIR overrides `.fleet`. Every write re-reads the file under a lock across threads and processes.

Entries an older fleet wrote (a fingerprint without P2P and virtualisation, one winner and `failed`) are never
applied as they are, since a P2P failure learned in a VM must not apply to bare metal: each host's part of
them moves to the host's new fingerprint the next time a deploy or tune of that playbook probes the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fleet import site
from fleet.deploy import evidence, noise
from fleet.deploy.results import Attempt
from fleet.host.facts import HostFacts
from fleet.outcomes import Outcome
from fleet.playbook import Playbook, Rung, merged_flags, sglang_version
from fleet.upstream.versions import version_key
from fleet.yamlfile import JsonObject

VERSION = 2
_NEW_PARTS = ("p2p", "virtualization")  # what version 1 fingerprints lacked


@dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """What decides which rung serves best on a host: GPU models, count and SMs, interconnect, P2P,
    virtualisation, driver and the installed package versions. Its key names its entry in known-good.json."""

    gpu: tuple[str, ...]
    count: int
    sm: tuple[int, ...]
    interconnect: str
    p2p: str
    virtualization: str
    driver: str | None
    packages: Mapping[str, str]

    def to_json(self) -> dict[str, object]:
        return {"gpu": list(self.gpu), "count": self.count, "sm": list(self.sm), "interconnect": self.interconnect,
                "p2p": self.p2p, "virtualization": self.virtualization, "driver": self.driver,
                "packages": dict(self.packages)}

    def legacy_json(self) -> dict[str, object]:
        """As a version 1 fleet wrote it: without P2P and virtualisation."""
        return {name: value for name, value in self.to_json().items() if name not in _NEW_PARTS}

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]


def of(facts: HostFacts) -> Fingerprint:
    return Fingerprint(gpu=tuple(sorted({g.name or "?" for g in facts.gpus})), count=len(facts.gpus),
                       sm=tuple(sorted({g.sm for g in facts.gpus if g.sm})), interconnect=facts.interconnect,
                       p2p=facts.p2p, virtualization=facts.virtualization or "unknown", driver=facts.driver_version,
                       packages={name: p.version for name, p in sorted(facts.packages.items()) if p.version})


def key(fingerprint: Fingerprint) -> str:
    return fingerprint.key


def path() -> Path:
    return site.find().state / "known-good.json"


def legacy(entry: object) -> bool:
    """An entry a version 1 fleet wrote: its fingerprint lacks P2P and virtualisation."""
    fp = entry.get("fingerprint") if isinstance(entry, dict) else None
    return isinstance(fp, dict) and not all(part in fp for part in _NEW_PARTS)


def load() -> dict[str, dict[str, object]]:
    """Every entry, each with its `rungs` evidence (built from a version 1 entry's winner and failures)."""
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    entries = data.get("entries", {}) if isinstance(data, dict) else {}
    if not isinstance(entries, dict):
        return {}
    out: dict[str, dict[str, object]] = {}
    for k, entry in entries.items():
        if isinstance(entry, dict):
            rungs = entry.get("rungs")
            out[str(k)] = {**entry, "rungs": rungs if isinstance(rungs, dict)
                           else evidence.rungs_to_json(evidence.from_legacy(entry))}
    return out


def unreadable(store: Path | None = None, version: int | None = None) -> str | None:
    """Why known-good.json (or `store`, a file of the same shape: slo-learned.json, whose load() reads only its
    `version`) is there but not readable as fleet's (torn, hand-broken, another version), which load() reads as
    empty; None when it reads or is not there yet."""
    try:
        data = json.loads((store or path()).read_text())
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    except ValueError as exc:
        return f"not JSON: {exc}"
    if not isinstance(data, dict) or not isinstance(data.get("entries", {}), dict):
        return "no mapping of entries"
    if version is not None and data.get("version") != version:
        return f"version {str(data.get('version'))[:20]!r}, where this fleet reads {version}"
    return None


def sglang_versions() -> list[str]:
    """The sglang versions this site's hosts reported when a deploy or tune remembered them."""
    found = set()
    for entry in load().values():
        fp = entry.get("fingerprint")
        packages = fp.get("packages") if isinstance(fp, dict) else None
        version = packages.get("sglang") if isinstance(packages, dict) else None
        if isinstance(version, str) and len(version) <= 40 and re.fullmatch(r"[0-9][0-9A-Za-z.+!_-]*", version):
            with suppress(ValueError):
                found.add(str(version_key(version)))  # PEP 440, normalised: '0.5.9-post1' is 0.5.9.post1
    return sorted(found, key=version_key)


def _flags(book: Playbook, rung: Rung, facts: HostFacts) -> evidence.Flags:
    flags: evidence.Flags = json.loads(json.dumps(merged_flags(book.flags, rung, sglang_version(facts))))
    return flags


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _write(entries: dict[str, dict[str, object]]) -> None:
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        json.loads(target.read_text())
    except FileNotFoundError:
        pass
    except ValueError:  # torn or hand-broken: kept aside for a person, never silently overwritten
        os.replace(target, target.with_name(target.name + ".unreadable"))
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps({"version": VERSION, "entries": entries}, indent=2) + "\n")
    os.replace(tmp, target)


def _min_gain(book: Playbook) -> float:
    """The gain a later rung needs to win, as inv tune decides (the playbook's bench.min_gain)."""
    return book.bench.min_gain if book.bench else noise.MIN_GAIN


def _entry(fp: Fingerprint, book: Playbook, rungs: evidence.Rungs) -> dict[str, object]:
    ladder, gain = [r.name for r in book.ladder], _min_gain(book)
    return {"fingerprint": fp.to_json(), "playbook": book.name, **evidence.summary(rungs, ladder, gain).to_json(),
            "rungs": evidence.rungs_to_json(rungs), "ladder": ladder, "min_gain": gain, "at": _now()}


def _entry_gain(entry: Mapping[str, object]) -> float:
    """The min_gain an entry was decided with (an older fleet's entry has none: the default)."""
    gain = entry.get("min_gain")
    return float(gain) if isinstance(gain, int | float) and not isinstance(gain, bool) and 0 <= gain < 1 \
        else noise.MIN_GAIN


def _rungs(entry: Mapping[str, object] | None) -> evidence.Rungs:
    """An entry's evidence, typed (load gave every entry its `rungs`)."""
    return evidence.rungs_from_json((entry or {}).get("rungs"))


def _adopt(entries: dict[str, dict[str, object]], fp: Fingerprint, book: Playbook, host: str) -> evidence.Rungs:
    """This host's part of version 1 entries of its hardware, moved into its fingerprint's entry's evidence
    (the rest stays for the other hosts, an emptied entry goes). Returns the entry's evidence."""
    rungs = _rungs(entries.get(f"{fp.key}/{book.name}"))
    old_fp = fp.legacy_json()
    for old_key, entry in list(entries.items()):
        if not (legacy(entry) and entry.get("playbook") == book.name and entry.get("fingerprint") == old_fp):
            continue
        left: evidence.Rungs = {}
        for name, record in _rungs(entry).items():
            mine = record.hosts.get(host)
            theirs = rungs.get(name) or evidence.RungEvidence()
            if mine is not None and theirs.flags in ({}, record.flags):
                rungs[name] = evidence.RungEvidence(record.flags, {**theirs.hosts, host: mine})
            rest = {h: m for h, m in record.hosts.items() if h != host}
            if rest:
                left[name] = evidence.RungEvidence(record.flags, rest)
        if left:
            entries[old_key] = {**entry, "rungs": evidence.rungs_to_json(left)}
        else:
            del entries[old_key]
    return rungs


def _merge(book: Playbook, facts: HostFacts, host: str, results: list[tuple[str, str, float | None,
                                                                          float | None, str | None]]) -> str:
    """Add (rung, outcome, tok/s, spread, release) results of `host` to its fingerprint's evidence."""
    fp = of(facts)
    k = fp.key
    by_name = {r.name: r for r in book.ladder}
    with _locked():
        entries = load()
        rungs = _adopt(entries, fp, book, host)
        at = _now()
        who = evidence.label(rungs, host, facts.address)  # the name, or name@address if another host has it
        for rung, outcome, tok, spread, release in results:
            if rung in by_name:
                rungs = evidence.add(rungs, rung, _flags(book, by_name[rung], facts), who, outcome, at, tok,
                                     spread, release, facts.address)
        entries[f"{k}/{book.name}"] = _entry(fp, book, rungs)
        _write(entries)
    return k


def _measured(attempt: JsonObject) -> tuple[float | None, float | None]:
    """A tune attempt's median tok/s and spread over its counted runs (a deploy's single gate run is not one)."""
    bench = attempt.get("bench")
    runs = bench.get("runs") if isinstance(bench, dict) else None
    if not isinstance(runs, dict):
        return None, None
    record = evidence.HostEvidence.from_json({"tok_s": runs.get("median"), "spread": runs.get("spread")})
    return record.tok_s, record.spread


def remember(book: Playbook, facts: HostFacts, host: str, release: str, attempts: list[JsonObject]) -> str:
    """A tune's results on `host` (every rung it ran, with the measured tok/s and spread: its release's
    recorded attempts) added to the fingerprint's evidence; what other hosts and earlier tunes found stays.
    Returns the key."""
    results = []
    for a in attempts:
        rung, outcome = a.get("rung"), a.get("outcome")
        if not a.get("final") and isinstance(rung, str) and isinstance(outcome, str):
            tok, spread = _measured(a)
            results.append((rung, outcome, tok, spread, release if outcome == Outcome.READY else None))
    return _merge(book, facts, host, results)


def learn(book: Playbook, facts: HostFacts, rung: Rung | None, host: str, release: str,
          attempts: list[Attempt]) -> str:
    """A deploy's results added to the fingerprint's evidence: the rungs that failed and the serve on `rung`
    (None: nothing served, the host rolled back). Safe from several threads and processes at once."""
    served = rung.name if rung else None
    results: list[tuple[str, str, float | None, float | None, str | None]] = [
        (a.rung, a.outcome, None, None, None) for a in attempts if a.rung != served]
    return _merge(book, facts, host, [*results, *([(served, Outcome.READY.value, None, None, release)]
                                                  if served else [])])


_LEARNING = threading.Lock()


def _locked() -> AbstractContextManager[None]:
    """One writer of known-good.json at a time (fleet.site.one_writer)."""
    return site.one_writer(path(), _LEARNING)


def _lookup(book: Playbook, facts: HostFacts) -> dict[str, object] | None:
    """The fingerprint's entry, with this host's part of version 1 entries moved in first (written back)."""
    fp = of(facts)
    entries = load()
    if not any(legacy(e) and e.get("playbook") == book.name for e in entries.values()):
        return entries.get(f"{fp.key}/{book.name}")
    with _locked():
        entries = load()
        before = json.dumps(entries, sort_keys=True)
        rungs = _adopt(entries, fp, book, facts.host)
        if rungs:
            entries[f"{fp.key}/{book.name}"] = _entry(fp, book, rungs)
        if json.dumps(entries, sort_keys=True) != before:  # this host had a part to move
            _write(entries)
    return entries.get(f"{fp.key}/{book.name}")


def winner(book: Playbook, facts: HostFacts, rungs: list[Rung]) -> str | None:
    """The rung among `rungs` this hardware's evidence says serves best, while its flags are the ones it ran
    with (None: no evidence); what arrange puts first after the retries, and what a deploy means to serve."""
    entry = _lookup(book, facts)
    if not entry:
        return None
    known = _rungs(entry)
    best = evidence.summary(known, [r.name for r in book.ladder]).rung
    return next((r.name for r in rungs if r.name == best and (seen := known.get(r.name)) is not None
                 and seen.flags == _flags(book, r, facts)), None)


def arrange(book: Playbook, facts: HostFacts, rungs: list[Rung],
            say: Callable[[str], None]) -> tuple[list[Rung], list[tuple[str, str]]]:
    """The rungs with the fingerprint's winner first and confirmed crashes left out ((rung, why) for each). A
    rung seen to crash once stays ahead of the winner: this deploy confirms or clears the sighting."""
    entry = _lookup(book, facts)
    if not entry:
        return rungs, []
    k = of(facts).key
    known = _rungs(entry)
    best_known = evidence.summary(known, [r.name for r in book.ladder], _min_gain(book))  # the evidence, not the file
    skipped: list[tuple[str, str]] = []
    kept: list[Rung] = []
    for rung in rungs:
        record = known.get(rung.name) or evidence.RungEvidence()
        why = evidence.skip_reason(record) if record.flags == _flags(book, rung, facts) else None
        if why:
            why = f"known to fail on this hardware ({why}, fingerprint {k})"
            say(f"rung {rung.name}: {why}")
            skipped.append((rung.name, why))
        else:
            kept.append(rung)
    def evidence_of(r: Rung) -> evidence.RungEvidence | None:  # only while its flags are the ones it ran with
        record = known.get(r.name) or evidence.RungEvidence()
        return record if record.flags == _flags(book, r, facts) else None

    best = [r for r in kept if r.name == best_known.rung and evidence_of(r)]
    if best:
        at = kept.index(best[0])
        again = [r for r in kept[:at] if (seen := evidence_of(r)) and evidence.unconfirmed(seen)]
        for r in again:
            why = evidence.standing(known[r.name])
            say(f"rung {r.name}: seen to fail on this hardware, not confirmed ({why}): trying it again before the "
                "known-good rung")
        speed = f"{best_known.tok_s:,.0f} tok/s on" if best_known.tok_s else "served on"
        say(f"rung {best[0].name}: known-good on this hardware ({speed} "
            f"{best_known.host}, fingerprint {k}): trying it {'next' if again else 'first'}")
        kept = again + best + [r for r in kept if r is not best[0] and r not in again]
    return kept, skipped


@dataclass(frozen=True)
class Learned:
    """One host's results for one rung of one fingerprint and playbook, as `inv learned` shows them."""

    key: str
    playbook: str
    rung: str
    host: str
    served: int
    tok_s: float | None
    spread: float | None
    failures: dict[str, int]
    last: str
    at: str
    winner: bool
    skipped: str | None  # why the rung is skipped for the fingerprint, or None
    legacy: bool  # learned before P2P and virtualisation were in the fingerprint; not applied as it is
    why: str = ""  # why the rung stands where it does: how the winner was decided, or why it is (not) known-bad

    def to_json(self) -> JsonObject:
        return {"fingerprint": self.key.split("/", 1)[0], "playbook": self.playbook, "rung": self.rung,
                "host": self.host, "served": self.served, "tok_s": self.tok_s, "spread": self.spread,
                "failures": self.failures, "last": self.last, "at": self.at, "winner": self.winner,
                "skipped": self.skipped, "legacy": self.legacy, "why": self.why}


@dataclass(frozen=True)
class Selection:
    """Which of what was learned a view or `inv forget` is about (empty: everything)."""

    hosts: frozenset[str] = frozenset()
    playbook: str | None = None
    rungs: frozenset[str] = frozenset()
    fingerprint: str | None = None

    def entry(self, k: str, entry: Mapping[str, object]) -> bool:
        return ((self.playbook is None or entry.get("playbook") == self.playbook)
                and (self.fingerprint is None or k.split("/", 1)[0] == self.fingerprint))

    def result(self, rung: str, host: str) -> bool:
        return (not self.rungs or rung in self.rungs) and (not self.hosts or host in self.hosts)


def _ladder(entry: Mapping[str, object], rungs: evidence.Rungs) -> list[str]:
    """The ladder an entry was decided on (an older fleet's entry has none: its rungs, in order)."""
    ladder = entry.get("ladder")
    return [str(n) for n in ladder] if isinstance(ladder, list) else list(rungs)


def _rows(entries: dict[str, dict[str, object]], pick: Selection) -> list[Learned]:
    out = []
    for k, entry in sorted(entries.items()):
        if not pick.entry(k, entry):
            continue
        rungs = _rungs(entry)
        best, decided = evidence.decide(rungs, _ladder(entry, rungs), _entry_gain(entry))
        for rung, record in rungs.items():
            why = None if legacy(entry) else evidence.skip_reason(record)  # a version 1 entry is never applied
            said = ("learned before P2P and virtualisation were in the fingerprint: not applied as it is"
                    if legacy(entry) else f"winner: {decided}" if rung == best else evidence.standing(record))
            for host, mine in record.hosts.items():
                if pick.result(rung, host):
                    out.append(Learned(k, str(entry.get("playbook")), rung, host, mine.served, mine.tok_s,
                                       mine.spread, dict(mine.failures), mine.last, mine.at,
                                       rung == entry.get("rung"), why, legacy(entry), said))
    return out


def learned(pick: Selection) -> list[Learned]:
    """What the fleet learned, one row per fingerprint, playbook, rung and host (read only)."""
    return _rows(load(), pick)


def forget(pick: Selection, dry_run: bool = False) -> list[Learned]:
    """Clear the results `pick` selects (under the lock; the file before is kept as known-good.json.bak) and
    return them; an entry left without results goes, the others are summed up again from what stays."""
    with _locked():
        entries = load()
        gone = _rows(entries, pick)
        if dry_run or not gone:
            return gone
        for k, entry in list(entries.items()):
            if not pick.entry(k, entry):
                continue
            rungs: evidence.Rungs = {}
            for rung, record in _rungs(entry).items():
                hosts = {h: m for h, m in record.hosts.items() if not pick.result(rung, h)}
                if hosts:
                    rungs[rung] = evidence.RungEvidence(record.flags, hosts)
            if not rungs:
                del entries[k]
                continue
            fields = {} if legacy(entry) else evidence.summary(rungs, _ladder(entry, rungs),
                                                               _entry_gain(entry)).to_json()
            entries[k] = {**entry, **fields, "rungs": evidence.rungs_to_json(rungs)}
        backup = path().with_name(path().name + ".bak")
        tmp = backup.with_name(f".{backup.name}.{os.getpid()}")
        tmp.write_bytes(path().read_bytes())
        os.replace(tmp, backup)
        _write(entries)
    return gone
