"""What the fleet learned about one fingerprint and playbook, as evidence (pure): per rung, each host's results.

An entry of `.fleet/known-good.json` keeps, per rung and host, how often it served, its measured tok/s and
spread (tune), and its failures counted by class. From that evidence, never from the last write:
- a rung is skipped only when a failure the hardware or versions cause was seen twice or more, on one host or
  several (a single crash is a fluke until a second sighting confirms it), and no host's latest result for it
  is a serve. CUDA_OOM is such a class: one over-greedy rung OOMs everywhere, while another tenant's OOM on
  one host is seen once and does not count until it repeats;
- the winner (tried first) is the fastest measured rung that served, else the first rung of the ladder that
  served; a rung seen to crash once stays ahead of it, so the next deploy confirms or clears the sighting.
Host-local and environmental classes (a hang, a full disk, a network blip, an interrupted run) are kept as
evidence but never count.
"""

from __future__ import annotations

import statistics
from typing import Any

from fleet.outcomes import Outcome

# The failures the hardware and versions cause: these count toward skipping a rung.
HARDWARE = frozenset({"ARCH_UNSUPPORTED", "TMA_FAILURE", "AUTOTUNE_FAILURE", "NO_KERNEL_IMAGE", "ILLEGAL_ADDRESS",
                      "CUDA_GRAPH_FAILURE", "P2P_UNAVAILABLE", "KV_CACHE_TOO_SMALL", "CUDA_OOM",
                      Outcome.WRONG_ANSWER.value})
# Results that say nothing about the rung: it was not run, or not to its end.
_NOT_A_RESULT = frozenset({Outcome.PREFLIGHT.value, Outcome.STOPPED.value, Outcome.INTERRUPTED.value})
CONFIRMED = 2  # sightings (on one host or across hosts) before a failure class skips a rung
_MAX_HOSTS = 256  # hosts kept per rung; the oldest go first
_MAX_CLASSES = 16


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def host_record(raw: Any) -> dict[str, Any]:
    """One host's results for one rung, read defensively (the file is edited by hand and by older fleets)."""
    raw = raw if isinstance(raw, dict) else {}
    failures = raw.get("failures") if isinstance(raw.get("failures"), dict) else {}
    return {"served": _count(raw.get("served")), "tok_s": _num(raw.get("tok_s")), "spread": _num(raw.get("spread")),
            "release": raw.get("release") if isinstance(raw.get("release"), str) else None,
            "failures": {str(c): _count(n) for c, n in list(failures.items())[:_MAX_CLASSES] if _count(n)},
            "last": str(raw.get("last") or ""), "at": str(raw.get("at") or "")}


def rung_record(raw: Any) -> dict[str, Any]:
    raw = raw if isinstance(raw, dict) else {}
    hosts = raw.get("hosts") if isinstance(raw.get("hosts"), dict) else {}
    return {"flags": raw.get("flags") if isinstance(raw.get("flags"), dict) else {},
            "hosts": {str(h): host_record(r) for h, r in hosts.items()}}


def add(rungs: dict[str, Any], rung: str, flags: dict[str, Any], host: str, outcome: str, at: str,
        tok_s: float | None = None, spread: float | None = None, release: str | None = None) -> dict[str, Any]:
    """`rungs` (rung -> record) with one more result of `rung` on `host`. A rung whose flags changed starts
    again; a serve clears that host's failures (the rung works there now) and keeps its measured speed."""
    if outcome in _NOT_A_RESULT or not host:
        return rungs
    out = dict(rungs)
    record = rung_record(out.get(rung))
    if record["flags"] != flags:
        record = {"flags": flags, "hosts": {}}
    hosts = dict(record["hosts"])
    mine = host_record(hosts.pop(host, None))
    if outcome == Outcome.READY:
        mine = {**mine, "served": mine["served"] + 1, "failures": {}, "release": release or mine["release"]}
    else:
        mine = {**mine, "failures": {**mine["failures"], outcome: mine["failures"].get(outcome, 0) + 1}}
    if tok_s is not None:
        mine = {**mine, "tok_s": tok_s, "spread": spread}
    hosts[host] = {**mine, "last": outcome, "at": at}  # newest last: the oldest go first past the cap
    out[rung] = {"flags": flags, "hosts": dict(list(hosts.items())[-_MAX_HOSTS:])}
    return out


def sightings(record: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Counting failure classes of a rung: class -> {host: times seen}."""
    out: dict[str, dict[str, int]] = {}
    for host, mine in record["hosts"].items():
        for cls, n in mine["failures"].items():
            if cls in HARDWARE:
                out.setdefault(cls, {})[host] = n
    return out


def serves_somewhere(record: dict[str, Any]) -> bool:
    return any(m["last"] == Outcome.READY for m in record["hosts"].values())


def skip_reason(record: dict[str, Any]) -> str | None:
    """Why a rung is skipped for its fingerprint, or None: a counting class seen at least twice (one host or
    several), while no host's latest result for the rung is a serve."""
    if serves_somewhere(record):
        return None
    for cls, by_host in sorted(sightings(record).items(), key=lambda kv: -sum(kv[1].values())):
        seen = sum(by_host.values())
        if seen >= CONFIRMED or len(by_host) >= CONFIRMED:
            return f"{cls}, seen {seen}x on {', '.join(sorted(by_host))[:200]}"
    return None


def unconfirmed(record: dict[str, Any]) -> bool:
    """A counting failure seen once, on one host: not yet evidence, worth one more try."""
    return not serves_somewhere(record) and skip_reason(record) is None and bool(sightings(record))


def speed(record: dict[str, Any]) -> tuple[float, float | None, str | None] | None:
    """The rung's measured tok/s across hosts (median), its spread (the widest of a host's spread and the range
    between hosts), and the fastest host; None when no host measured it."""
    measured = [(m["tok_s"], m["spread"], h) for h, m in record["hosts"].items() if m["tok_s"]]
    if not measured:
        return None
    values = [t for t, _, _ in measured]
    spreads = [s for _, s, _ in measured if s is not None]
    spread = max([*spreads, max(values) - min(values)]) if len(values) > 1 or spreads else None
    return statistics.median(values), spread, max(measured, key=lambda m: m[0])[2]


def winner(rungs: dict[str, Any], ladder: list[str]) -> str | None:
    """The rung to try first: the fastest measured one that serves somewhere, else the first of the ladder
    that serves somewhere (a rung no longer in the ladder counts after those that are)."""
    order = {name: i for i, name in enumerate(ladder)}
    serving = [n for n, r in rungs.items() if serves_somewhere(rung_record(r)) and not skip_reason(rung_record(r))]
    measured = [(s[0], n) for n in serving if (s := speed(rung_record(rungs[n])))]
    if measured:
        return max(measured, key=lambda m: (m[0], -order.get(m[1], len(order))))[1]
    return min(serving, key=lambda n: order.get(n, len(order)), default=None)


def summary(rungs: dict[str, Any], ladder: list[str]) -> dict[str, Any]:
    """The winner fields an entry carries for its readers (rung, tok_s, spread, host, release) and `failed`, the
    rungs with failures of note: {outcome, seen, hosts, skipped} per rung, the most seen class first."""
    best = winner(rungs, ladder)
    out: dict[str, Any] = {"rung": best, "tok_s": 0.0, "spread": None, "host": None, "release": None, "failed": {}}
    if best is not None:
        record = rung_record(rungs[best])
        measured = speed(record)
        served = [(m["at"], h, m) for h, m in record["hosts"].items() if m["last"] == Outcome.READY]
        host = measured[2] if measured else max(served, key=lambda s: s[0])[1] if served else None
        out.update(flags=record["flags"], tok_s=measured[0] if measured else 0.0,
                   spread=measured[1] if measured else None, host=host,
                   release=record["hosts"][host]["release"] if host else None)
    for name, raw in rungs.items():
        record = rung_record(raw)
        classes: dict[str, dict[str, int]] = {}
        for host, mine in record["hosts"].items():
            for cls, n in mine["failures"].items():
                if cls in HARDWARE or cls == Outcome.PERF_REGRESSION:
                    classes.setdefault(cls, {})[host] = n
        if classes and name != best:
            cls, by_host = max(classes.items(), key=lambda kv: (kv[0] in HARDWARE, sum(kv[1].values())))
            out["failed"][name] = {"outcome": cls, "flags": record["flags"], "seen": sum(by_host.values()),
                                   "hosts": sorted(by_host), "skipped": skip_reason(record) is not None}
    return out


def from_legacy(entry: dict[str, Any]) -> dict[str, Any]:
    """The rungs evidence of an entry an older fleet wrote (a winner, and `failed` with an outcome, a count and
    hosts): the winner served once on its host with its tok/s, each failure seen on its hosts (a count of more
    sightings than hosts is put on the first host)."""
    rungs: dict[str, Any] = {}
    at = str(entry.get("at") or "")
    if isinstance(entry.get("rung"), str) and isinstance(entry.get("host"), str):
        flags: dict[str, Any] = entry["flags"] if isinstance(entry.get("flags"), dict) else {}
        tok = _num(entry.get("tok_s")) or None
        rungs = add(rungs, entry["rung"], flags, entry["host"], Outcome.READY.value, at, tok,
                    _num(entry.get("spread")) if tok else None,
                    entry.get("release") if isinstance(entry.get("release"), str) else None)
    failed: dict[str, Any] = entry["failed"] if isinstance(entry.get("failed"), dict) else {}
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
