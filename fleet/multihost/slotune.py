"""`inv tune --slo`: the configuration that serves the most requests per second within a latency promise (issue 47:
one host, a small budget).

The trials come from the search space (fleet.deploy.searchspace: the flag table's flags for the host's release,
narrowed by the playbook's `tune:`, values whose kernels exclude the host's SM ruled out before any start), chosen
one at a time by a model of what was measured (fleet.deploy.guided; what crashed is not started again). Each trial
is one start of the server, as a rung (fleet.deploy.attempt); on it, without a restart, a short load search
(fleet.deploy.loadsearch over fleet.deploy.loadprobe) finds the highest request rate whose p99s keep the SLO
(each point judged on its bootstrap interval's upper bound, fleet.deploy.slo), and a trial whose short result
comes near the best goes on to the full-length search on the same server. Two finalists within `band` of each
other are started in turn (ABBA, `pairs` of them) and compared by their replicates (fleet.deploy.replicates): a
winner only when the interval shows it at least 1% faster. The winner serves as a release of its own and is
printed as a rung for the playbook. After the first stop, any failure or a Ctrl-C puts back the release that
served before, as `inv tune` does, and what was measured stays on the controller (fleet.deploy.tunelog):
`inv tune --slo` again resumes the search.
"""

from __future__ import annotations

import statistics
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, cast

from fabric import Connection

from fleet import parallel
from fleet.deploy import (
    fingerprint,
    guided,
    loadprobe,
    loadsearch,
    pareto,
    preflight,
    replicates,
    searchspace,
    slo,
    slolearned,
    trials,
    tunelog,
)
from fleet.deploy.bench import BenchError
from fleet.deploy.hostrun import HostRun
from fleet.deploy.ladder import facts_summary
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt, FellBack
from fleet.errors import FleetError
from fleet.host.facts import HostFacts
from fleet.host.releases import Release, ReleaseStore, new_id, now
from fleet.host.session import ConnectionLost
from fleet.multihost.tune import Tuner, TuneResult
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus
from fleet.playbook import Rung, sglang_version
from fleet.progress import ticking


@dataclass(frozen=True)
class SloSettings:
    promise: slo.Slo
    text: str  # as given, for the rung's description
    budget: int = 6  # server starts at most (the winner's restart not counted)
    requests: int = slo.DEFAULT_REQUESTS  # per load point
    first_point_s: float = 10.0  # the first load point offers its requests over about this long
    ceiling: float = 1024.0  # requests per second
    max_points: int = 8  # load points per search
    short_requests: int = 0  # per point of the short probe (0: a fifth of `requests`, at least 10)
    pairs: int = replicates.PAIRS  # interleaved replicate pairs of two finalists (0: none)
    band: float = 0.05  # finalists: the runner-up's full rate within this of the best's

    @property
    def short(self) -> int:
        return self.short_requests or max(self.requests // 5, 10)


@dataclass(frozen=True)
class TrialRecord:
    name: str
    flags: dict[str, Any]
    outcome: str
    rate: float | None = None  # the highest request rate kept, at the highest fidelity reached
    points: list[dict[str, Any]] = field(default_factory=list)
    short_rate: float | None = None  # the short probe's
    full: bool = False  # `rate` is the full-length search's
    why: str = ""  # why this trial (the search's choice), or "replicate A" / "replicate B"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "flags": self.flags, "outcome": self.outcome, "rate": self.rate,
                "short_rate": self.short_rate, "full": self.full, "why": self.why, "points": self.points}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialRecord:
        why, mark = str(data.get("why") or ""), " (before the resume)"
        return cls(str(data["name"]), dict(data["flags"]), str(data["outcome"]), data.get("rate"),
                   list(data.get("points") or []), data.get("short_rate"), bool(data.get("full")),
                   why if why.endswith(mark) else why + mark)


@dataclass(frozen=True)
class SloTuneResult(TuneResult):
    slo: str = ""
    trials: list[TrialRecord] = field(default_factory=list)
    ruled_out: list[str] = field(default_factory=list)
    winner_rate: float | None = None
    rung_yaml: str | None = None
    comparison: str | None = None  # the finalists' replicates, as said to the operator
    stopped: str = ""  # why the search stopped
    resumed: int = 0  # trials measured by an interrupted search before this one (fleet.deploy.tunelog)
    served: list[pareto.Served] = field(default_factory=list)  # every load point that kept the promise
    front: list[pareto.Served] = field(default_factory=list)  # their Pareto front
    picture: str | None = None  # the front as an SVG file (the CLI writes it)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "slo": self.slo, "trials": [t.to_json() for t in self.trials],
                "ruled_out": self.ruled_out, "winner_rate": self.winner_rate, "rung": self.rung_yaml,
                "comparison": self.comparison, "stopped": self.stopped, "resumed": self.resumed,
                "pareto": [{"trial": p.trial, "rate": p.rate, "tok_s_per_gpu": p.per_gpu,
                            "tok_s_per_user": p.per_user} for p in self.front], "picture": self.picture}


@dataclass
class Tried:
    """What a search has tried so far, filled in as it goes (through its own methods); the result gets it once,
    at the end (an exception may end the search: what it tried is still said)."""

    attempts: list[Attempt] = field(default_factory=list)
    trials: list[TrialRecord] = field(default_factory=list)
    ruled_out: list[str] = field(default_factory=list)  # by what was learned before (inv learned)
    resumed: int = 0
    stopped: str = ""
    comparison: str | None = None

    def resume(self, records: list[TrialRecord], measured: int) -> None:
        self.trials, self.resumed = records, measured

    def measured(self, **changes: Any) -> TrialRecord:
        """The last trial's record with what its load searches found."""
        self.trials[-1] = replace(self.trials[-1], **changes)
        return self.trials[-1]

    def stop(self, why: str) -> None:
        self.stopped = why

    def compared(self, says: str) -> None:
        self.comparison = says

    def into(self, result: SloTuneResult) -> SloTuneResult:
        return replace(result, attempts=[*result.attempts, *self.attempts], trials=[*result.trials, *self.trials],
                       ruled_out=[*result.ruled_out, *self.ruled_out], resumed=self.resumed, stopped=self.stopped,
                       comparison=self.comparison)


def served(records: list[TrialRecord], gpus: int) -> list[pareto.Served]:
    """Every load point that kept the promise and said what it served, per GPU and per user."""
    out = []
    for t in records:
        for p in t.points:
            tok_s, per_user = p.get("tok_s"), p.get("tok_s_per_user")
            if p.get("passed") and tok_s and per_user:
                out.append(pareto.Served(t.name, float(p["rate"]), float(tok_s) / max(gpus, 1), float(per_user)))
    return out


def space_host(facts: HostFacts) -> searchspace.Host:
    sms = {g.sm for g in facts.gpus if g.sm is not None}
    if len(sms) != 1:
        raise FleetError(f"{facts.host}: the GPUs' SM is {sorted(sms) or 'unknown'}: one SM is needed to tune")
    versions = {name: pkg.version for name, pkg in facts.packages.items() if pkg.version}
    return searchspace.Host(sm=sms.pop(), gpus=len(facts.gpus), versions=versions)


def point_json(p: loadsearch.Point, asked: int, speed: loadsearch.Speed | None = None) -> dict[str, Any]:
    """A load point as --json and the tune log show it: `asked` requests offered at `rate`, `requests` finished."""
    return {"rate": p.rate, "passed": p.passed, "asked": asked, "requests": p.verdict.requests,
            "p99": {str(c.target): [c.interval.low, c.interval.estimate, c.interval.high] for c in p.verdict.checks},
            "tok_s": speed.tok_s if speed else None, "tok_s_per_user": speed.tok_s_per_user if speed else None}


class SloTuner(Tuner):
    settings: ClassVar[SloSettings]
    sglang: str | None = None  # the host's release, for the winner's restart
    previous: Release | None = None  # the release that served before the tune
    journal: Path = Path()  # where the search so far is kept (fleet.deploy.tunelog)
    speeds: dict[float, loadsearch.Speed | None]  # the last load point at each rate: what it served
    gpus: int = 1
    seen: list[guided.Seen]  # what this search measured (set when it starts)
    digest: str = ""

    @classmethod
    def with_settings(cls, settings: SloSettings) -> type[SloTuner]:
        return cast(type[SloTuner], type("SloTunerFor", (cls,), {"settings": settings}))

    def point(self, conn: Connection, rate: float, requests: int) -> slo.Verdict:
        s = self.settings
        self.progress(f"load point: {rate:.3g} req/s, {requests} requests")
        try:  # a point is requests/rate seconds (1000 at 2 req/s: 500 s): never a quiet one
            with ticking(self.progress, f"load point {rate:.3g} req/s", self.spec.timeout):
                samples, self.speeds[rate] = loadprobe.measure(conn, self.host, self.book, self.spec,
                                                               self.serve.venv, rate, requests, self.serve.bench_key)
        except BenchError as exc:  # a point the server cannot carry: it fails, the search goes lower
            self.progress(f"load point at {rate:.3g} req/s failed: {exc}")
            return slo.Verdict(0, (), False)
        verdict = slo.judge(samples, s.promise, slo.seeded(samples), min_requests=requests)
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
        previous = self.previous = store.current()
        self.speeds, self.gpus = {}, len(facts.gpus)
        release = Release(id=new_id(), host=self.host.name, playbook=self.book.name,
                          playbook_sha256=self.serve.book_sha, created=now(),
                          facts={**facts_summary(facts), "fingerprint": result.fingerprint})
        if self.hooks is not None:
            self.hooks.take_out(self.host, conn, self.progress)
        run = host_run.open_release(store, release, tune=True, rungs=[])
        result = replace(result, release=release.id)
        self.runner.key_by(facts)  # the key of each trial's warm start (serve.warm_start)
        tried = Tried()  # each attempt and trial as it ends
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
        seen = self.seen = self._resume(space, result, tried)
        hint, known_bad = self._learned(result, tried)
        planned: dict[trials.Trial, Any] = {}
        last: list[trials.Trial] = []  # the trial the server runs now, if any
        try:
            with parallel.interruptible():
                while (choice := guided.next_trial(space, seen, s.budget, self.book.flags, hint=hint,
                                                   known_bad=known_bad)).trial is not None:
                    parallel.checkpoint()
                    trial = choice.trial
                    started = self._start(conn, run, facts, trial, version, tried, planned, choice.why)
                    if isinstance(started, FellBack):
                        return tried.into(result).ended_on(started)
                    if not started:
                        seen.append(guided.Seen(trial, None, crashed=True))
                    else:
                        last[:] = [trial]
                        seen.append(self._measure(conn, trial, seen, tried))
                    tunelog.save(self.journal, self.digest, seen, [t.to_json() for t in tried.trials])
                    parallel.checkpoint()
                tried.stop(choice.why)
                self.progress(f"search stopped: {choice.why}")
                chosen = self._final(conn, run, facts, seen, version, tried, planned, last)
        except KeyboardInterrupt:
            self.progress("interrupted: putting back the release that served before the tune")
            fell = self.fall_back(conn, run.store, run.release, previous, "tune interrupted",
                                  ReleaseStatus.INTERRUPTED)
            self.progress(fell.said_as(self.host.name))
            raise
        if isinstance(chosen, FellBack):
            return tried.into(result).ended_on(chosen)
        return self._finish(conn, run, chosen, planned, last[0] if last else None, tried.into(result), previous)

    def _learned(self, result: SloTuneResult, tried: Tried) -> tuple[trials.Trial | None, set[guided.Feature]]:
        """What earlier searches on this fingerprint, playbook and promise found (fleet.deploy.slolearned): the
        best winner, tried right after the base, and the values that crashed, never started."""
        learned = slolearned.lookup(result.fingerprint or "", self.book.name, self.settings.text)
        if learned is None:
            return None, set()
        for flag, value in learned.crashed:
            tried.ruled_out.append(f"--{flag} {value}: crashed a start on this hardware before (inv learned)")
            self.progress(f"ruled out before any trial: {tried.ruled_out[-1]}")
        best = learned.best()
        if best is not None:
            self.progress(f"the winner on this hardware before: {dict(best.flags)} at {best.rate:.3g} req/s on "
                          f"{best.host}")
        return (trials.Trial.of(dict(best.flags)) if best else None), set(learned.crashed)

    def _remember(self, result: SloTuneResult, winner: trials.Trial | None, rate: float | None) -> None:
        bad = sorted(guided.blamed(self.seen, self.book.flags)[0], key=repr)
        slolearned.remember(result.fingerprint or "", self.book.name, self.settings.text, self.host.name, winner,
                            rate, result.release or "", bad)

    def _resume(self, space: searchspace.Space, result: SloTuneResult, tried: Tried) -> list[guided.Seen]:
        """What an earlier, interrupted search of the same host, hardware, playbook, promise and space measured."""
        self.digest = tunelog.key(self.host.name, result.fingerprint or "", self.serve.book_sha, self.settings.text,
                                  space)
        self.journal = tunelog.path(self.host.name, self.digest)
        journal, why = tunelog.load(self.journal, self.digest)
        if why:
            self.progress(why)
        if journal is None:
            return []
        tried.resume([TrialRecord.from_json(r) for r in journal.records], len(journal.seen))
        self.progress(f"resuming the search: {len(journal.seen)} trials measured before ({self.journal})")
        return list(journal.seen)

    def _start(self, conn: Connection, run: ReleaseRun, facts: HostFacts, trial: trials.Trial, version: str | None,
               tried: Tried, planned: dict[trials.Trial, Any], why: str) -> bool | FellBack:
        """One start of the server with `trial`'s flags: True when it serves (its record appended), False when
        preflight refused it or it crashed, FellBack after a GPU fault (the previous release is back)."""
        rung = Rung(name=trial.name(), description="inv tune --slo trial", flags=trial.as_dict())
        ok, refused = preflight.check(conn, self.host, self.book, self.serve.venv, self.serve.unit, facts, [rung],
                                      self.progress)
        if not ok:
            tried.attempts.extend(refused)
            tried.trials.append(TrialRecord(rung.name, trial.as_dict(), Outcome.PREFLIGHT, why=why))
            return False
        attempt, planned[trial] = self.runner.attempt(conn, run, rung, version, measure=False)
        attempt, fault = self.runner.judge_hardware(conn, run, attempt, facts)
        tried.attempts.append(attempt)
        run.record(attempt)
        if fault:
            return self.fall_back(conn, run.store, run.release, self.previous, f"GPU fault: {attempt.evidence}")
        tried.trials.append(TrialRecord(rung.name, trial.as_dict(), attempt.outcome, why=why))
        return attempt.outcome == Outcome.READY

    def _search_load(self, conn: Connection, requests: int, start: float, rel_tol: float) -> loadsearch.LoadSearch:
        s = self.settings
        return loadsearch.search(lambda rate: self.point(conn, rate, requests), min(start, s.ceiling), s.ceiling,
                                 rel_tol=rel_tol, max_points=s.max_points)

    def _measure(self, conn: Connection, trial: trials.Trial, seen: list[guided.Seen], tried: Tried) -> guided.Seen:
        """The short probe on the running server (the last trial's), then the full-length search when the short
        result earns it."""
        s = self.settings
        short = self._search_load(conn, s.short, s.short / s.first_point_s, 0.10)
        points = [point_json(p, s.short, self.speeds.get(p.rate)) for p in short.points]
        record = tried.measured(short_rate=short.highest, rate=short.highest,
                                points=[*tried.trials[-1].points, *points])
        self.progress(f"{record.name}: {short.highest or 0:.3g} req/s kept over {s.short} requests a point")
        if not guided.promote(short.highest, seen, bounded=short.lowest_failing is not None,
                              failed_at=short.lowest_failing):
            return guided.Seen(trial, short.highest)
        full = self._search_load(conn, s.requests, short.highest or s.requests / s.first_point_s, 0.05)
        points = [point_json(p, s.requests, self.speeds.get(p.rate)) for p in full.points]
        record = tried.measured(rate=full.highest, full=True, points=[*record.points, *points])
        self.progress(f"{record.name}: {full.highest or 0:.3g} req/s kept over {s.requests} requests a point")
        return guided.Seen(trial, full.highest, full=True, short=short.highest)

    def _final(self, conn: Connection, run: ReleaseRun, facts: HostFacts, seen: list[guided.Seen],
               version: str | None, tried: Tried, planned: dict[trials.Trial, Any],
               last: list[trials.Trial]) -> tuple[trials.Trial, float] | None | FellBack:
        """The winner and its rate: the best full result, unless the runner-up is within the band and beats it
        over interleaved replicates (equal within noise: the best full result stays, and the report says so)."""
        top = guided.best_full(seen)
        if top is None or top.rate is None:
            return None
        pair = guided.finalists(seen, self.settings.band)
        if pair is None or self.settings.pairs < 1:
            return top.trial, top.rate
        rates: dict[trials.Trial, list[float]] = {pair[0]: [], pair[1]: []}
        for side in replicates.order(self.settings.pairs):
            parallel.checkpoint()
            trial = pair[0] if side is replicates.Side.A else pair[1]
            started = self._start(conn, run, facts, trial, version, tried, planned, f"replicate {side.upper()}")
            if isinstance(started, FellBack):
                return started
            last[:] = [trial] if started else []
            kept = self._search_load(conn, self.settings.requests, top.rate, 0.05).highest if started else None
            tried.measured(rate=kept, full=True)
            if kept is None:
                tried.compared(f"replicate {side.upper()} of {trial.name()} kept none: {pair[0].name()} stays")
                return top.trial, top.rate
            rates[trial].append(kept)
        cmp = replicates.compare(rates[pair[0]], rates[pair[1]])
        says = cmp.says(pair[0].name(), pair[1].name())
        tried.compared(says)
        self.progress(says)
        won = pair[1] if cmp.winner is replicates.Side.B else pair[0]
        return won, statistics.median(rates[won])

    def _finish(self, conn: Connection, run: ReleaseRun, chosen: tuple[trials.Trial, float] | None,
                planned: dict[trials.Trial, Any], last: trials.Trial | None, result: SloTuneResult,
                previous: Release | None) -> TuneResult:
        kept = served(result.trials, self.gpus)
        result = replace(result, served=kept, front=pareto.front(kept))
        if chosen is None:
            self._remember(result, None, None)
            return result.ended_on(self.fall_back(conn, run.store, run.release, previous,
                                                   f"no trial kept {self.settings.text}"))
        best, rate = chosen
        name = best.name()
        result = replace(result, winner=name, winner_rate=rate,
                         rung_yaml=trials.rung_yaml(best, self.settings.text, rate, self.host.name))
        self.progress(f"winner: {name} at {rate:.3g} req/s within {self.settings.text}")
        if best != last or best not in planned:  # the server runs another trial, or it ran before a resume
            rung = Rung(name=name, description="inv tune --slo winner", flags=best.as_dict())
            final, planned[best] = self.runner.attempt(conn, run, rung, self.sglang, measure=False)
            result = replace(result, final=final)
            run.release.add_attempt({**final.to_json(), "final": True})
            if final.outcome != Outcome.READY:
                return result.ended_on(self.fall_back(conn, run.store, run.release, previous,
                                                       f"the winner {name} did not start again"))
        run.succeed(name, planned[best].config, self.book.keep_releases, tune=True)
        self._remember(result, best, rate)
        tunelog.done(self.journal)
        return replace(result, status=DeployStatus.OK)
