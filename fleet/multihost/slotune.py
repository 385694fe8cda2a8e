"""`inv tune --slo`: the configuration that serves the most requests per second within a latency promise (issue 47,
first cut: one host, a small budget).

The trials come from the search space (fleet.deploy.searchspace: the flag table's flags for the host's release,
narrowed by the playbook's `tune:`, values whose kernels exclude the host's SM ruled out before any start), one
flag at a time from the best so far (fleet.deploy.trials; a value that crashed is not started again). Each trial
is one start of the server, as a rung (fleet.deploy.attempt); on it, without a restart, a load search
(fleet.deploy.loadsearch over fleet.deploy.loadprobe) finds the highest request rate whose p99s keep the SLO
(each point judged on its bootstrap interval's upper bound, fleet.deploy.slo). The winner serves as a release of
its own and is printed as a rung for the playbook. After the first stop, any failure or a Ctrl-C puts back the
release that served before, as `inv tune` does.
"""

from __future__ import annotations

import random
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, cast

from fabric import Connection

from fleet import parallel
from fleet.deploy import fingerprint, loadprobe, loadsearch, preflight, searchspace, slo, trials
from fleet.deploy.bench import BenchError
from fleet.deploy.hostrun import HostRun
from fleet.deploy.ladder import facts_summary
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt
from fleet.errors import FleetError
from fleet.host.facts import HostFacts
from fleet.host.releases import Release, ReleaseStore, new_id, now
from fleet.host.session import ConnectionLost
from fleet.multihost.tune import Tuner, TuneResult
from fleet.outcomes import DeployStatus, Outcome
from fleet.playbook import Rung, sglang_version


@dataclass(frozen=True)
class SloSettings:
    promise: slo.Slo
    text: str  # as given, for the rung's description
    budget: int = 6  # server starts at most (the winner's restart not counted)
    requests: int = slo.DEFAULT_REQUESTS  # per load point
    first_point_s: float = 10.0  # the first load point offers its requests over about this long
    ceiling: float = 1024.0  # requests per second
    max_points: int = 8  # load points per trial


@dataclass(frozen=True)
class TrialRecord:
    name: str
    flags: dict[str, Any]
    outcome: str
    rate: float | None = None  # the highest request rate kept
    points: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "flags": self.flags, "outcome": self.outcome, "rate": self.rate,
                "points": self.points}


@dataclass(frozen=True)
class SloTuneResult(TuneResult):
    slo: str = ""
    trials: list[TrialRecord] = field(default_factory=list)
    ruled_out: list[str] = field(default_factory=list)
    winner_rate: float | None = None
    rung_yaml: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "slo": self.slo, "trials": [t.to_json() for t in self.trials],
                "ruled_out": self.ruled_out, "winner_rate": self.winner_rate, "rung": self.rung_yaml}


@dataclass(frozen=True)
class Tried:
    """What a search has tried so far, filled in as it goes; the result gets it once, at the end."""

    attempts: list[Attempt]
    trials: list[TrialRecord]

    def into(self, result: SloTuneResult) -> SloTuneResult:
        return replace(result, attempts=[*result.attempts, *self.attempts], trials=[*result.trials, *self.trials])


def space_host(facts: HostFacts) -> searchspace.Host:
    sms = {g.sm for g in facts.gpus if g.sm is not None}
    if len(sms) != 1:
        raise FleetError(f"{facts.host}: the GPUs' SM is {sorted(sms) or 'unknown'}: one SM is needed to tune")
    versions = {name: pkg.version for name, pkg in facts.packages.items() if pkg.version}
    return searchspace.Host(sm=sms.pop(), gpus=len(facts.gpus), versions=versions)


def point_json(p: loadsearch.Point) -> dict[str, Any]:
    return {"rate": p.rate, "passed": p.passed, "requests": p.verdict.requests,
            "p99": {str(c.target): [c.interval.low, c.interval.estimate, c.interval.high] for c in p.verdict.checks}}


class SloTuner(Tuner):
    settings: ClassVar[SloSettings]
    sglang: str | None = None  # the host's release, for the winner's restart

    @classmethod
    def with_settings(cls, settings: SloSettings) -> type[SloTuner]:
        return cast(type[SloTuner], type("SloTunerFor", (cls,), {"settings": settings}))

    def point(self, conn: Connection, rate: float) -> slo.Verdict:
        s = self.settings
        self.progress(f"load point: {rate:.3g} req/s, {s.requests} requests")
        try:
            samples = loadprobe.measure(conn, self.host, self.book, self.spec, self.serve.venv, rate, s.requests,
                                        self.serve.bench_key)
        except BenchError as exc:  # a point the server cannot carry: it fails, the search goes lower
            self.progress(f"load point at {rate:.3g} req/s failed: {exc}")
            return slo.Verdict(0, (), False)
        verdict = slo.judge(samples, s.promise, random.Random(), min_requests=s.requests)
        for c in verdict.checks:
            self.progress(f"  {c.target}: p99 {c.interval.estimate * 1000:.0f} ms, upper {c.interval.high * 1000:.0f}"
                          f" ms: {'kept' if c.passed else 'not kept'}")
        return verdict

    def _tune(self, host_run: HostRun, facts: HostFacts, rungs: list[Rung]) -> TuneResult:
        conn = host_run.session.conn
        s = self.settings
        space = searchspace.build(space_host(facts), self.book.tune)
        for r in space.ruled_out:
            self.progress(f"ruled out before any trial: {r.reason}")
        result = SloTuneResult(self.host.name, DeployStatus.FAILED, slo=s.text,
                               fingerprint=fingerprint.key(fingerprint.of(facts)),
                               ruled_out=[r.reason for r in space.ruled_out])
        store = ReleaseStore(conn, self.host)
        previous = store.current()
        release = Release(id=new_id(), host=self.host.name, playbook=self.book.name,
                          playbook_sha256=self.serve.book_sha, created=now(),
                          facts={**facts_summary(facts), "fingerprint": result.fingerprint})
        if self.hooks is not None:
            self.hooks.take_out(self.host, conn, self.progress)
        run = host_run.open_release(store, release, tune=True, rungs=[])
        result = replace(result, release=release.id)
        self.runner.key_by(facts)  # the key of each trial's warm start (serve.warm_start)
        tried = Tried([], [])  # each attempt and trial as it ends (an exception may end the search)
        try:
            return self._search(conn, run, facts, space, result, previous, tried)
        except ConnectionLost:
            raise
        except Exception as exc:  # any step after the stop: the previous release goes back
            if not self.runner.touched:
                with suppress(Exception):
                    run.fail()
                raise
            why = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            self.progress(f"{why}; falling back")
            return tried.into(result).ended_on(self.fall_back(conn, store, release, previous, why))

    def _search(self, conn: Connection, run: ReleaseRun, facts: HostFacts, space: searchspace.Space,
                result: SloTuneResult, previous: Release | None, tried: Tried) -> TuneResult:
        s, version = self.settings, sglang_version(facts)
        self.sglang = version
        results: dict[trials.Trial, trials.Outcome] = {}
        planned: dict[trials.Trial, Any] = {}
        last: trials.Trial | None = None
        try:
            with parallel.interruptible():
                while (trial := trials.next_trial(space, results, s.budget, self.book.flags)) is not None:
                    parallel.checkpoint()
                    rung = Rung(name=trial.name(), description="inv tune --slo trial", flags=trial.as_dict())
                    ok, refused = preflight.check(conn, self.host, self.book, self.serve.venv, self.serve.unit,
                                                  facts, [rung], self.progress)
                    if not ok:
                        tried.attempts.extend(refused)
                        results[trial] = trials.Outcome(None, crashed=True)
                        tried.trials.append(TrialRecord(rung.name, trial.as_dict(), Outcome.PREFLIGHT))
                        continue
                    attempt, planned[trial] = self.runner.attempt(conn, run, rung, version, measure=False)
                    last = trial
                    attempt, fault = self.runner.judge_hardware(conn, run, attempt, facts)
                    tried.attempts.append(attempt)
                    run.record(attempt)
                    if fault:
                        return tried.into(result).ended_on(self.fall_back(conn, run.store, run.release, previous,
                                                                          f"GPU fault: {attempt.evidence}"))
                    if attempt.outcome != Outcome.READY:
                        results[trial] = trials.Outcome(None, crashed=True)
                        tried.trials.append(TrialRecord(rung.name, trial.as_dict(), attempt.outcome))
                        continue
                    start = min(s.requests / s.first_point_s, s.ceiling)
                    found = loadsearch.search(lambda rate: self.point(conn, rate), start, s.ceiling,
                                              max_points=s.max_points)
                    results[trial] = trials.Outcome(found.highest)
                    tried.trials.append(TrialRecord(rung.name, trial.as_dict(), Outcome.READY, found.highest,
                                                    [point_json(p) for p in found.points]))
                    self.progress(f"{rung.name}: {found.highest or 0:.3g} req/s kept")
                    parallel.checkpoint()
        except KeyboardInterrupt:
            self.progress("interrupted: putting back the release that served before the tune")
            fell = self.fall_back(conn, run.store, run.release, previous, "tune interrupted")
            self.progress(fell.error or f"back on release {fell.release}")
            raise
        return self._finish(conn, run, results, planned, last, tried.into(result), previous)

    def _finish(self, conn: Connection, run: ReleaseRun, results: dict[trials.Trial, trials.Outcome],
                planned: dict[trials.Trial, Any], last: trials.Trial | None, result: SloTuneResult,
                previous: Release | None) -> TuneResult:
        best = trials.best(results)
        if best is None:
            return result.ended_on(self.fall_back(conn, run.store, run.release, previous,
                                                   f"no trial kept {self.settings.text}"))
        name, rate = best.name(), results[best].rate or 0.0
        result = replace(result, winner=name, winner_rate=rate,
                         rung_yaml=trials.rung_yaml(best, self.settings.text, rate, self.host.name))
        self.progress(f"winner: {name} at {rate:.3g} req/s within {self.settings.text}")
        if best != last:  # the server runs another trial now: start the winner again
            rung = Rung(name=name, description="inv tune --slo winner", flags=best.as_dict())
            final, _ = self.runner.attempt(conn, run, rung, self.sglang, measure=False)
            result = replace(result, final=final)
            run.release.add_attempt({**final.to_json(), "final": True})
            if final.outcome != Outcome.READY:
                return result.ended_on(self.fall_back(conn, run.store, run.release, previous,
                                                       f"the winner {name} did not start again"))
        run.succeed(name, planned[best].config, self.book.keep_releases, tune=True)
        return replace(result, status=DeployStatus.OK)
