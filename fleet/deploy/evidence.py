"""What the fleet learned about one fingerprint and playbook, as evidence (pure): per rung, each host's results.

An entry of `.fleet/known-good.json` keeps, per rung and host, how often it served, its measured tok/s and
spread (tune), and its failures counted by class. From that evidence, never from the last write, the fleet
records decisions, not raw numbers:
- a rung is skipped (known-bad) only when a failure that is a property of the hardware and software was
  confirmed, and no host's latest result for it is a serve. A class no host alone can cause (FINGERPRINT_WIDE:
  the kernels or the architecture, the same on every host of the fingerprint) is confirmed by a second
  sighting, on one host or another; a class one host can cause on its own (HOST_LOCAL: CUDA_OOM from another
  tenant's memory, a faulty GPU's illegal address or wrong answer) only by sightings on two distinct hosts;
- the winner (tried first) is decided by inv tune's rule (fleet.deploy.noise.compare): the first rung of the
  ladder that serves, unless a later measured one beats it beyond both spreads and the playbook's min_gain; a
  rung seen to crash but not confirmed stays ahead of it, so the next deploy confirms or clears the sighting.
Environmental classes (a hang, a full disk, a network blip, an interrupted run) are kept as evidence but never
count.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fleet.deploy import noise
from fleet.outcomes import Outcome

# Failures no host alone can cause (playbooks/rules): no kernel image or an unsupported architecture for the GPU's
# SM, a TMA kernel whose tiles overflow the SM's shared memory; the fingerprint holds the SM and the versions.
FINGERPRINT_WIDE = frozenset({"ARCH_UNSUPPORTED", "NO_KERNEL_IMAGE", "TMA_FAILURE"})
# Failures the rung may cause, or one host alone: GPU memory another tenant holds (CUDA_OOM, KV_CACHE_TOO_SMALL,
# a graph capture or the autotuner running out of it), a GPU that faults (ILLEGAL_ADDRESS: Xid 13/43, a wrong
# answer), a host's PCIe/IOMMU setup (P2P_UNAVAILABLE). They count only when seen on two distinct hosts.
HOST_LOCAL = frozenset({"AUTOTUNE_FAILURE", "ILLEGAL_ADDRESS", "CUDA_GRAPH_FAILURE", "P2P_UNAVAILABLE",
                        "KV_CACHE_TOO_SMALL", "CUDA_OOM", Outcome.WRONG_ANSWER.value})
# The failures the hardware and versions may cause: these count toward skipping a rung.
HARDWARE = FINGERPRINT_WIDE | HOST_LOCAL
# Results that say nothing about the rung: it was not run, or not to its end.
_NOT_A_RESULT = frozenset({Outcome.PREFLIGHT.value, Outcome.STOPPED.value, Outcome.INTERRUPTED.value})
CONFIRMED = 2  # sightings of a FINGERPRINT_WIDE class (any hosts), or distinct hosts of a HOST_LOCAL one
_MAX_HOSTS = 256  # hosts kept per rung; the oldest go first
_MAX_CLASSES = 16

Flags = dict[str, object]  # a rung's server flags as it ran (JSON values, compared, never read here)


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


@dataclass(frozen=True)
class HostEvidence:
    """One host's results for one rung: how often it served, its measured tok/s and spread (tune), the release
    it served in, its failures by class, and its latest result and when."""

    served: int = 0
    tok_s: float | None = None
    spread: float | None = None
    release: str | None = None
    failures: Mapping[str, int] = field(default_factory=dict)
    last: str = ""
    at: str = ""
    address: str | None = None  # the host's address: another inventory's host of the same name is another host

    def to_json(self) -> dict[str, object]:
        return {"served": self.served, "tok_s": self.tok_s, "spread": self.spread, "release": self.release,
                "failures": dict(self.failures), "last": self.last, "at": self.at,
                **({"address": self.address} if self.address else {})}

    @classmethod
    def from_json(cls, raw: object) -> HostEvidence:
        """Read defensively: the file is edited by hand and by older fleets, and one bad field must not lose
        what the rest of the fleet learned, so a field of the wrong type reads as empty."""
        d: Mapping[str, object] = raw if isinstance(raw, dict) else {}
        failures = d.get("failures")
        failures = failures if isinstance(failures, dict) else {}
        release, address = d.get("release"), d.get("address")
        return cls(served=_count(d.get("served")), tok_s=_num(d.get("tok_s")), spread=_num(d.get("spread")),
                   release=release if isinstance(release, str) else None,
                   failures={str(c): _count(n) for c, n in list(failures.items())[:_MAX_CLASSES] if _count(n)},
                   last=str(d.get("last") or ""), at=str(d.get("at") or ""),
                   address=address if isinstance(address, str) and address else None)


@dataclass(frozen=True)
class RungEvidence:
    """Every host's results for one rung, under the flags it ran with (changed flags start it again)."""

    flags: Flags = field(default_factory=dict)
    hosts: Mapping[str, HostEvidence] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"flags": self.flags, "hosts": {h: e.to_json() for h, e in self.hosts.items()}}

    @classmethod
    def from_json(cls, raw: object) -> RungEvidence:
        d: Mapping[str, object] = raw if isinstance(raw, dict) else {}
        flags, hosts = d.get("flags"), d.get("hosts")
        return cls(flags if isinstance(flags, dict) else {},
                   {str(h): HostEvidence.from_json(r) for h, r in (hosts if isinstance(hosts, dict) else {}).items()})


Rungs = dict[str, RungEvidence]  # rung name -> its evidence, for one fingerprint and playbook


def rungs_from_json(raw: object) -> Rungs:
    return {str(n): RungEvidence.from_json(r) for n, r in raw.items()} if isinstance(raw, dict) else {}


def rungs_to_json(rungs: Rungs) -> dict[str, object]:
    return {n: r.to_json() for n, r in rungs.items()}


def label(rungs: Rungs, name: str, address: str | None) -> str:
    """The key a host's results go under: its name, unless that name holds another address's results (another
    inventory's host of the same name): then `name@address`. A result recorded without an address (an older
    fleet) is the first such host's."""
    if not address:
        return name
    seen = {e.address for r in rungs.values() for h, e in r.hosts.items() if h == name}
    return name if not seen or seen <= {address, None} else f"{name}@{address}"


def add(rungs: Rungs, rung: str, flags: Flags, host: str, outcome: str, at: str,
        tok_s: float | None = None, spread: float | None = None, release: str | None = None,
        address: str | None = None) -> Rungs:
    """`rungs` with one more result of `rung` on `host` (a label: see label()). A rung whose flags changed starts
    again; a serve clears that host's failures (the rung works there now) and keeps its measured speed."""
    if outcome in _NOT_A_RESULT or not host:
        return rungs
    record = rungs.get(rung) or RungEvidence(flags)
    if record.flags != flags:
        record = RungEvidence(flags)
    hosts = dict(record.hosts)
    mine = hosts.pop(host, None) or HostEvidence()
    mine = replace(mine, address=address or mine.address)
    if outcome == Outcome.READY:
        mine = replace(mine, served=mine.served + 1, failures={}, release=release or mine.release)
    else:
        mine = replace(mine, failures={**mine.failures, outcome: mine.failures.get(outcome, 0) + 1})
    if tok_s is not None:
        mine = replace(mine, tok_s=tok_s, spread=spread)
    hosts[host] = replace(mine, last=outcome, at=at)  # newest last: the oldest go first past the cap
    return {**rungs, rung: RungEvidence(flags, dict(list(hosts.items())[-_MAX_HOSTS:]))}


def sightings(record: RungEvidence) -> dict[str, dict[str, int]]:
    """Counting failure classes of a rung: class -> {host: times seen}."""
    out: dict[str, dict[str, int]] = {}
    for host, mine in record.hosts.items():
        for cls, n in mine.failures.items():
            if cls in HARDWARE:
                out.setdefault(cls, {})[host] = n
    return out


def serves_somewhere(record: RungEvidence) -> bool:
    return any(m.last == Outcome.READY for m in record.hosts.values())


def skip_reason(record: RungEvidence) -> str | None:
    """Why a rung is skipped for its fingerprint, or None: a FINGERPRINT_WIDE class seen at least twice (one host
    or several), or a HOST_LOCAL one seen on two distinct hosts, while no host's latest result is a serve."""
    if serves_somewhere(record):
        return None
    for cls, by_host in sorted(sightings(record).items(), key=lambda kv: -sum(kv[1].values())):
        seen, where = sum(by_host.values()), ", ".join(sorted(by_host))[:200]
        if cls in FINGERPRINT_WIDE and seen >= CONFIRMED:
            why = ("no host alone causes it" if len(by_host) > 1 else
                   "a class of the hardware and stack, not of the host")
            return f"{cls}, seen {seen}x on {where}: {why}"
        if len(by_host) >= CONFIRMED:
            return f"{cls}, seen {seen}x on {len(by_host)} hosts: {where}"
    return None


def unconfirmed(record: RungEvidence) -> bool:
    """A counting failure not yet confirmed (seen once, or a host-local class on one host only): not yet
    evidence, worth one more try."""
    return not serves_somewhere(record) and skip_reason(record) is None and bool(sightings(record))


def standing(record: RungEvidence) -> str:
    """Why a rung that is not the winner is where it is, in one line (inv learned)."""
    if why := skip_reason(record):
        return f"known-bad: {why}"
    if serves_somewhere(record):
        return "serves; not the winner"
    if seen := sightings(record):
        cls, by_host = max(seen.items(), key=lambda kv: sum(kv[1].values()))
        n, hosts = sum(by_host.values()), ", ".join(sorted(by_host))
        need = "a second sighting" if cls in FINGERPRINT_WIDE else "a second host"
        return f"{cls} seen {n}x on {hosts} only: not known-bad until {need}"
    return "no failure that counts"


def speed(record: RungEvidence) -> tuple[float, float | None, str | None] | None:
    """The rung's measured tok/s across hosts (median), its spread (the widest of a host's spread and the range
    between hosts), and the fastest host; None when no host measured it."""
    measured = [(m.tok_s, m.spread, h) for h, m in record.hosts.items() if m.tok_s]
    if not measured:
        return None
    values = [t for t, _, _ in measured]
    spreads = [s for _, s, _ in measured if s is not None]
    spread = max([*spreads, max(values) - min(values)]) if len(values) > 1 or spreads else None
    return statistics.median(values), spread, max(measured, key=lambda m: m[0])[2]


def decide(rungs: Rungs, ladder: list[str], min_gain: float = noise.MIN_GAIN) -> tuple[str | None, str]:
    """The rung to try first and why, by inv tune's rule: the first of the ladder that serves somewhere (a rung
    no longer in the ladder after those that are), unless a later one's measured tok/s beats the one chosen so
    far beyond both spreads and by min_gain (fleet.deploy.noise.compare); a rung not measured beats none."""
    order = {name: i for i, name in enumerate(ladder)}
    serving = sorted((n for n, r in rungs.items() if serves_somewhere(r) and not skip_reason(r)),
                     key=lambda n: order.get(n, len(order)))
    if not serving:
        return None, ""
    chosen, why = serving[0], f"the first rung of the ladder that serves ({serving[0]})"
    for name in serving[1:]:
        held, other = speed(rungs[chosen]), speed(rungs[name])
        if held is None or other is None:
            continue
        beats, line = noise.compare(chosen, (held[0], held[1] or 0.0), name, (other[0], other[1] or 0.0),
                                    min_gain)
        if beats:
            chosen, why = name, line
        elif why.startswith("the first"):
            why = f"{why}; {line}"
    return chosen, why


def winner(rungs: Rungs, ladder: list[str], min_gain: float = noise.MIN_GAIN) -> str | None:
    return decide(rungs, ladder, min_gain)[0]


@dataclass(frozen=True)
class FailedRung:
    """A rung with failures of note, by its most telling class: how often, where, and whether it is skipped."""

    outcome: str
    flags: Flags
    seen: int
    hosts: tuple[str, ...]
    skipped: bool

    def to_json(self) -> dict[str, object]:
        return {"outcome": self.outcome, "flags": self.flags, "seen": self.seen, "hosts": list(self.hosts),
                "skipped": self.skipped}


@dataclass(frozen=True)
class EvidenceSummary:
    """The winner fields an entry of known-good.json carries for its readers, and the rungs that failed."""

    rung: str | None = None
    tok_s: float = 0.0
    spread: float | None = None
    host: str | None = None
    release: str | None = None
    failed: Mapping[str, FailedRung] = field(default_factory=dict)
    flags: Flags | None = None  # the winner's; None when there is none
    why: str = ""  # how the winner was decided (decide)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"rung": self.rung, "tok_s": self.tok_s, "spread": self.spread, "host": self.host,
                                  "release": self.release, "failed": {n: f.to_json() for n, f in self.failed.items()}}
        if self.flags is not None:
            out["flags"] = self.flags
        out["why"] = self.why
        return out


def summary(rungs: Rungs, ladder: list[str], min_gain: float = noise.MIN_GAIN) -> EvidenceSummary:
    """The winner (rung, tok_s, spread, host, release, flags, why) and `failed`, the rungs with failures of note:
    {outcome, seen, hosts, skipped} per rung, the most seen class first."""
    best, why = decide(rungs, ladder, min_gain)
    out = EvidenceSummary(rung=best, why=why)
    if best is not None:
        record = rungs[best]
        measured = speed(record)
        served = [(m.at, h) for h, m in record.hosts.items() if m.last == Outcome.READY]
        host = measured[2] if measured else max(served, key=lambda s: s[0])[1] if served else None
        out = replace(out, flags=record.flags, tok_s=measured[0] if measured else 0.0,
                      spread=measured[1] if measured else None, host=host,
                      release=record.hosts[host].release if host else None)
    failed: dict[str, FailedRung] = {}
    for name, record in rungs.items():
        classes: dict[str, dict[str, int]] = {}
        for host, mine in record.hosts.items():
            for cls, n in mine.failures.items():
                if cls in HARDWARE or cls == Outcome.PERF_REGRESSION:
                    classes.setdefault(cls, {})[host] = n
        if classes and name != best:
            cls, by_host = max(classes.items(), key=lambda kv: (kv[0] in HARDWARE, sum(kv[1].values())))
            failed[name] = FailedRung(cls, record.flags, sum(by_host.values()), tuple(sorted(by_host)),
                                      skip_reason(record) is not None)
    return replace(out, failed=failed)


def from_legacy(entry: Mapping[str, Any]) -> Rungs:
    """The rungs evidence of an entry an older fleet wrote (a winner, and `failed` with an outcome, a count and
    hosts): the winner served once on its host with its tok/s, each failure seen on its hosts (a count of more
    sightings than hosts is put on the first host)."""
    rungs: Rungs = {}
    at = str(entry.get("at") or "")
    if isinstance(entry.get("rung"), str) and isinstance(entry.get("host"), str):
        flags: Flags = entry["flags"] if isinstance(entry.get("flags"), dict) else {}
        tok = _num(entry.get("tok_s")) or None
        rungs = add(rungs, entry["rung"], flags, entry["host"], Outcome.READY.value, at, tok,
                    _num(entry.get("spread")) if tok else None,
                    entry.get("release") if isinstance(entry.get("release"), str) else None)
    failed = entry["failed"] if isinstance(entry.get("failed"), dict) else {}
    for name, bad in failed.items():
        if not isinstance(bad, dict) or not isinstance(bad.get("outcome"), str) or name == entry.get("rung"):
            continue
        hosts = [h for h in bad.get("hosts") or [entry.get("host")] if isinstance(h, str)][:_MAX_HOSTS] or ["?"]
        extra = max(_count(bad.get("seen")) or 1, len(hosts)) - len(hosts)
        flags = bad["flags"] if isinstance(bad.get("flags"), dict) else {}
        for i, host in enumerate(hosts):
            for _ in range(1 + (extra if i == 0 else 0)):
                rungs = add(rungs, str(name), flags, host, bad["outcome"], at)
    return rungs
