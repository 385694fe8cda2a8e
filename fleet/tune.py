"""`inv bench` and `inv tune`.

bench: the benchmark against the running server, stored in the current release's manifest (`bench`).
tune: every eligible rung in turn (stop, install, start, watch, health, benchmark), the fastest deployed
again as a release of its own and remembered for the hardware fingerprint (fleet.fingerprint). Rungs
slower than the gate's fraction of the winner are PERF_REGRESSION; the ones that crash keep their class.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabric import Connection

from fleet import bench as benching
from fleet import fingerprint, hostlock, parallel, probe_run, restore
from fleet.connect import ConnectOptions, open_connection
from fleet.deploy import Deployer, facts_summary
from fleet.errors import FleetError, InputError
from fleet.facts import HostFacts
from fleet.inputs import load_playbook
from fleet.inventory import Host
from fleet.outcomes import DeployStatus, Outcome
from fleet.perfgate import PerfGate
from fleet.playbook import Bench, Playbook, Rung
from fleet.release_run import ReleaseRun
from fleet.releases import Release, ReleaseStore, new_id, now
from fleet.results import Attempt, Progress

DEFAULT_RESTART_S = 600.0  # a GLM-5 TP8 start with a JIT build takes about 6 minutes (sandbox/sim/README.md)

# ---------------------------------------------------------------------- inv bench


@dataclass
class BenchOutcome:
    host: str
    ok: bool
    release: str | None = None
    rung: str | None = None
    record: dict[str, Any] | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "ok": self.ok, "release": self.release, "rung": self.rung,
                "bench": self.record, "error": self.error}


def bench_host(host: Host, book: Playbook, path: Path, opts: ConnectOptions) -> BenchOutcome:
    spec = book.bench or Bench()
    d = Deployer(host, book, path, opts)
    conn = open_connection(host, opts)
    try:
        with hostlock.held(conn, host, "bench"):
            store = ReleaseStore(conn, host)
            current = store.current()
            if current is None:
                raise FleetError(f"{host.name}: no current release to measure (deploy first)")
            record = benching.run(conn, host, book, spec, d.venv, d.bench_key)
            record.update(release=current.id, rung=current.rung)
            benching.store_in_release(conn, host, current.dir, record)
            return BenchOutcome(host.name, True, current.id, current.rung, record)
    finally:
        conn.close()


def bench_hosts(hosts: Sequence[Host], name: str | None, opts: ConnectOptions) -> list[BenchOutcome]:
    book, path = load_playbook(name or "glm5-nvfp4")
    outcomes = parallel.run_all(hosts, lambda h: bench_host(h, book, path, opts))
    return [o.value if o.ok and o.value else BenchOutcome(o.host.name, False, error=o.error) for o in outcomes]


# ---------------------------------------------------------------------- inv tune


@dataclass
class TuneResult:
    host: str
    status: str  # DeployStatus: ok | rolled_back | failed
    release: str | None = None
    winner: str | None = None
    winner_tok_s: float | None = None
    attempts: list[Attempt] = field(default_factory=list)  # one per rung tried (the final restart is apart)
    final: Attempt | None = None  # the winner started again, when it was not the last rung tried
    fingerprint: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "status": self.status, "release": self.release, "winner": self.winner,
                "winner_tok_s": self.winner_tok_s, "fingerprint": self.fingerprint,
                "attempts": [a.to_json() for a in self.attempts],
                "final": self.final.to_json() if self.final else None, "error": self.error}


def tok_s(a: Attempt) -> float | None:
    value = (a.bench or {}).get("result", {}).get("output_throughput")
    return float(value) if value is not None else None


def relabel(attempts: list[Attempt], fraction: float) -> Attempt | None:
    """The fastest READY attempt; every other READY one below `fraction` of it becomes PERF_REGRESSION."""
    served = [a for a in attempts if a.outcome == Outcome.READY and tok_s(a) is not None]
    if not served:
        return None
    best = max(served, key=lambda a: tok_s(a) or 0.0)
    for a in served:
        if a is best:
            continue
        verdict = benching.evaluate(tok_s(a) or 0.0, fraction, best=(tok_s(best) or 0.0, f"rung {best.rung}"))
        if not verdict.ok:
            a.outcome, a.evidence = Outcome.PERF_REGRESSION, verdict.evidence
            a.bench = {**(a.bench or {}), "verdict": verdict.to_json()}
    return best


def restarts_estimate(conn: Connection, host: Host, rungs: int) -> tuple[int, float]:
    """(restarts, seconds): one per rung and one to bring the winner back; seconds from this host's past
    attempts that served (their median), else DEFAULT_RESTART_S each."""
    found, _ = benching.manifests(conn, host)
    past = [a.get("seconds", 0) for m in found for a in m.get("attempts") or [] if a.get("outcome") == Outcome.READY]
    each = statistics.median(past) if past else DEFAULT_RESTART_S
    return rungs + 1, (rungs + 1) * each


class Tuner:
    def __init__(self, host: Host, book: Playbook, path: Path, opts: ConnectOptions,
                 progress: Progress, secrets: dict[str, str], confirm: Callable[[str], bool]):
        self.host, self.book, self.opts, self.progress, self.confirm = host, book, opts, progress, confirm
        self.d = Deployer(host, book, path, opts, progress, secrets)
        self.d.measure = True
        # tune compares rungs with each other (and the floor), not with the host's history
        self.d.gate = PerfGate(host, book, self.d.venv, self.d.bench_key, compare_history=False)
        self.spec = book.bench or Bench()

    def run(self) -> TuneResult:
        conn = open_connection(self.host, self.opts)
        try:
            facts = probe_run.probe_on(conn, self.host)
            rungs = self.d.eligible(facts)
            if self.d.healthy(conn):
                n, seconds = restarts_estimate(conn, self.host, len(rungs))
                question = (f"{self.host.name} is serving: tuning {len(rungs)} rungs restarts it up to {n} times, "
                            f"about {seconds / 60:.0f} min of downtime in all. Go ahead?")
                if not self.confirm(question):
                    raise InputError(f"{self.host.name}: tune not confirmed; nothing was changed")
            with hostlock.held(conn, self.host, f"tune {self.book.name}"):
                return self._tune(conn, facts, rungs)
        finally:
            conn.close()

    def _tune(self, conn: Connection, facts: HostFacts, rungs: list[Rung]) -> TuneResult:
        result = TuneResult(self.host.name, DeployStatus.FAILED, fingerprint=fingerprint.key(fingerprint.of(facts)))
        store = ReleaseStore(conn, self.host)
        previous = store.current()
        release = Release(id=new_id(), host=self.host.name, playbook=self.book.name,
                          playbook_sha256=self.d.book_sha, created=now(),
                          facts={**facts_summary(facts), "fingerprint": result.fingerprint})
        rungs, refused = self.d.preflight(conn, facts, rungs)
        result.attempts += refused
        if not rungs:
            result.error = f"{self.host.name}: no rung of {self.book.name} can run here; nothing was changed"
            return result
        run = ReleaseRun.open(store, release, tune=True, rungs=[r.name for r in rungs])
        result.release = release.id
        planned = {}
        for rung in rungs:
            attempt, planned[rung.name] = self.d.attempt(conn, run, rung)
            result.attempts.append(attempt)
            run.record(attempt.to_json())
        best = relabel(result.attempts, self.spec.fraction)
        release.attempts = [a.to_json() for a in result.attempts]
        if best is not None:
            result.winner, result.winner_tok_s = best.rung, tok_s(best)
            self.progress(f"fastest: {best.rung} at {benching.tok(tok_s(best) or 0)} tok/s")
            final_ok = True
            if result.attempts[-1] is not best:  # the server now runs another rung: start the winner again
                self.d.measure = False
                self.progress(f"starting {best.rung} again")
                result.final, _ = self.d.attempt(conn, run, self.book.rung(best.rung))
                release.attempts.append({**result.final.to_json(), "final": True})
                final_ok = result.final.outcome == Outcome.READY
            if final_ok:
                run.succeed(best.rung, planned[best.rung].config, self.book.keep_releases, tune=True)
                if best.bench:
                    benching.store_in_release(conn, self.host, release.dir, {**best.bench, "release": release.id,
                                                                  "rung": best.rung})
                fingerprint.remember(self.book, facts, self.book.rung(best.rung), tok_s(best) or 0.0,
                                     self.host.name, release.id, release.attempts)
                result.status = DeployStatus.OK
                return result
        result.status, result.release, _, result.error = restore.fall_back(
            conn, self.host, store, release, previous, self.book, self.d.unit, "no rung served", self.progress)
        return result


def tune_hosts(hosts: Sequence[Host], book: Playbook, path: Path, opts: ConnectOptions, secrets: dict[str, str],
               progress_for: Callable[[Host], Progress], confirm: Callable[[str], bool]) -> list[TuneResult]:
    """One host at a time (each may ask first); a host that fails is a result with its error, bad input
    (or a tune not confirmed) raises."""
    results = []
    for host in hosts:
        try:
            results.append(Tuner(host, book, path, opts, progress_for(host), secrets, confirm).run())
        except InputError:
            raise
        except FleetError as exc:
            results.append(TuneResult(host.name, DeployStatus.FAILED, error=str(exc)))
    return results
