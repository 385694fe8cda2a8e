"""`inv tune` (`inv bench` is fleet.multihost.bench's).

tune: every eligible rung in turn (stop, install, start, watch, health, benchmark), the fastest deployed
again as a release of its own and remembered for the hardware fingerprint (fleet.deploy.fingerprint). Rungs
slower than the gate's fraction of the winner are PERF_REGRESSION; the ones that crash keep their class.
A replica behind a router (a playbook's `router:`) is taken out of it and drained before either loads or stops
it, and put back once it serves (fleet.multihost.router.RouterHooks, as a rolling deploy does): no client is sent
to a rung under test.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

from fabric import Connection

from fleet import parallel
from fleet.deploy import bench as benching
from fleet.deploy import fallback, fingerprint, hardware, noise, preflight, restore
from fleet.deploy.attempt import AttemptRunner
from fleet.deploy.bench_record import BenchRecord
from fleet.deploy.hostrun import HostRun, deploy_recovery, host_run
from fleet.deploy.ladder import facts_summary
from fleet.deploy.noise import Runs
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt, FellBack, Planned
from fleet.deploy.serving import Serving, prune_venvs, with_pins
from fleet.errors import FleetError, InputError
from fleet.host import probe_run, venvs
from fleet.host.facts import HostFacts
from fleet.host.releases import Release, ReleaseStore, new_id, node_of, now
from fleet.host.session import ConnectionLost, HostSession
from fleet.host.venvs import VenvRecord
from fleet.inventory import Host
from fleet.logs.rules import LogClass
from fleet.multihost import router as routing
from fleet.multihost.tune_result import Draft
from fleet.multihost.tune_result import TuneBaseline as TuneBaseline  # what callers of the tune import from it
from fleet.multihost.tune_result import TuneResult as TuneResult
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus
from fleet.playbook import Bench, Playbook, Rung, sglang_version
from fleet.progress import Progress, ticking
from fleet.ssh.connect import ConnectOptions
from fleet.yamlfile import JsonObject

DEFAULT_RESTART_S = 600.0  # a GLM-5 TP8 start with a JIT build takes about 6 minutes (sandbox/sim/README.md)

# ---------------------------------------------------------------------- inv tune


def untouched(previous: Release | None) -> str:
    """What a Ctrl-C before any rung started leaves: the host as it was."""
    serving = f"release {previous.id} serves as before" if previous else "no release of fleet's was serving"
    return f"interrupted before any rung started: {serving}; nothing was changed"


def runs_of(a: Attempt) -> Runs | None:
    """The attempt's repeated runs, or its one measurement as a run of one."""
    if a.bench is None:
        return None
    value = a.bench.result.output_throughput
    return a.bench.runs or (Runs((float(value),)) if value is not None else None)


def tok_s(a: Attempt) -> float | None:
    """The attempt's result: the median of its runs."""
    runs = runs_of(a)
    return runs.median if runs else None


def pick(attempts: list[Attempt], fraction: float,
         min_gain: float) -> tuple[list[Attempt], Attempt | None, tuple[str, ...]]:
    """The attempts judged, the winner among the READY ones in ladder order (fleet.deploy.noise.choose: a later
    rung must beat the earlier beyond the noise), and the decisions; every other READY one below `fraction` of
    the winner becomes PERF_REGRESSION (the others are returned as they were)."""
    served = [(a, r) for a in attempts if a.outcome == Outcome.READY and (r := runs_of(a)) is not None]
    choice = noise.choose([(a.rung, r) for a, r in served], min_gain)
    if choice.winner is None:
        return attempts, None, ()
    best, best_runs = served[choice.winner]
    runs = {id(a): r for a, r in served}
    judged = [a if a is best or id(a) not in runs else _against(a, runs[id(a)], best, best_runs, fraction)
              for a in attempts]
    return judged, best, choice.decisions


def _against(a: Attempt, runs: Runs, best: Attempt, best_runs: Runs, fraction: float) -> Attempt:
    """A READY attempt against the winner: PERF_REGRESSION below `fraction` of it, else as it was."""
    verdict = benching.evaluate(runs.median, fraction, best=benching.Baseline(best_runs.median, f"rung {best.rung}",
                                                                              best_runs.spread))
    if verdict.ok:
        return a
    return replace(a, outcome=Outcome.PERF_REGRESSION, evidence=verdict.evidence, lost_to=best.rung,
                   bench=replace(a.bench, verdict=verdict) if a.bench else None)


def _attempts(manifest: JsonObject) -> list[JsonObject]:
    """A manifest's recorded attempts, as the host holds them (one not an object is none)."""
    listed = manifest.get("attempts")
    return [a for a in listed if isinstance(a, dict)] if isinstance(listed, list) else []


def restarts_estimate(conn: Connection, host: Host, rungs: int) -> tuple[int, float]:
    """(restarts, seconds): one per rung and one to bring the winner back; seconds from this host's past
    attempts that served (their median), else DEFAULT_RESTART_S each."""
    found, _ = benching.manifests(conn, host)
    past = [seconds for m in found for a in _attempts(m)
            if a.get("outcome") == Outcome.READY and isinstance(seconds := a.get("seconds", 0), int | float)]
    each = statistics.median(past) if past else DEFAULT_RESTART_S
    return rungs + 1, (rungs + 1) * each


def downtime_words(seconds: float) -> str:
    """'under a minute', 'about a minute', 'about 7 min': never 'about 0 min' for a short one."""
    if seconds < 60:
        return "under a minute"
    return "about a minute" if seconds < 90 else f"about {seconds / 60:.0f} min"


class Tuner:
    def __init__(self, host: Host, book: Playbook, path: Path, opts: ConnectOptions,
                 progress: Progress, secrets: dict[str, str], confirm: Callable[[str], bool], runs: int | None = None,
                 hooks: routing.RouterHooks | None = None):
        self.host, self.book, self.opts, self.progress, self.confirm = host, book, opts, progress, confirm
        self.hooks = hooks  # a replica behind a router: out of it before the first benchmark or stop
        self.serve = Serving.of(host, book, path, secrets)
        # every rung measured; tune compares rungs with each other (and the floor), not with the host's history
        self.runner = AttemptRunner(self.serve, progress, self.serve.gate(compare_history=False), measure=True)
        self.spec = book.bench or Bench()
        self.runs = self.spec.runs if runs is None else runs
        self.fastest: Runs | None = None  # the best median so far in this run
        self.venv: VenvRecord | None = None  # packages: the pins' venv

    def repeat(self, conn: Connection, attempt: Attempt) -> Attempt:
        """A rung that served: the gate's benchmark was the warm-up; `runs` more are counted (the attempt
        returned with them). A rung whose warm-up is already below `fraction` of the fastest so far (less its
        spread) is not repeated: it loses to it whatever the noise."""
        if attempt.outcome != Outcome.READY or not attempt.bench or self.runs < 1:
            return attempt
        warmup = attempt.bench.output_tok_s()
        if self.fastest is not None:
            verdict = benching.evaluate(warmup, self.spec.fraction, best=benching.Baseline(
                self.fastest.median, "the fastest so far", self.fastest.spread))
            if not verdict.ok:
                self.progress(f"{attempt.rung}: {verdict.evidence}: not repeated")
                return attempt
        values, last = [], attempt.bench
        for i in range(self.runs):
            parallel.checkpoint()
            try:
                last = self.bench(conn)
            except benching.BenchError as exc:
                return replace(attempt, outcome=Outcome.BENCH_FAILED, evidence=f"run {i + 1} of {self.runs}: {exc}")
            values.append(last.output_tok_s())
            self.progress(f"{attempt.rung}: run {i + 1} of {self.runs}: {benching.tok(values[-1])} tok/s")
        runs = Runs(tuple(values), warmup)
        if self.fastest is None or runs.median > self.fastest.median:
            self.fastest = runs
        return replace(attempt, bench=replace(last, verdict=attempt.bench.verdict, runs=runs),
                       evidence=attempt.evidence + (
                           f"; median of {len(values)} runs {benching.tok(runs.median)} tok/s, spread "
                           f"{benching.tok(runs.spread)} (warm-up {benching.tok(warmup)} not counted)"))

    def fall_back(self, conn: Connection, store: ReleaseStore, release: Release, previous: Release | None,
                  why: str, ends_as: ReleaseStatus = ReleaseStatus.FAILED) -> FellBack:
        """The release before back (fleet.deploy.fallback), the tune's closed as `ends_as`."""
        s = self.serve
        steps = restore.ServerSteps(conn, s.origin, store, release, self.book, s.unit, self.progress, ends_as)
        return fallback.fall_back(steps, previous, why, self.progress)

    def bench(self, conn: Connection) -> BenchRecord:
        with ticking(self.progress, "bench", self.spec.timeout):
            return benching.run(conn, self.host, self.book, self.spec, self.serve.venv, self.serve.bench_key)

    def measure_serving(self, conn: Connection, previous: Release) -> Runs | None:
        """The release serving before the tune, measured as each rung will be (a warm-up, then `runs` runs), so
        the tune keeps it unless a rung beats it beyond the noise; None when it cannot be measured."""
        self.progress(f"measuring release {previous.id} (serving before the tune) as each rung will be")
        try:
            warmup = self.bench(conn)
            self.progress(f"release {previous.id}: warm-up {benching.tok(warmup.output_tok_s())} tok/s (not counted)")
            values = []
            for i in range(self.runs):  # each said, as a rung's runs are (the same bench line came back for each)
                parallel.checkpoint()  # a Ctrl-C here changes nothing: the release still serves
                values.append(self.bench(conn))
                self.progress(f"release {previous.id}: run {i + 1} of {self.runs}: "
                              f"{benching.tok(values[-1].output_tok_s())} tok/s")
            runs = Runs(tuple(v.output_tok_s() for v in values), warmup.output_tok_s())
        except (benching.BenchError, benching.BenchRecordError) as exc:  # what the host sent is data
            self.progress(f"release {previous.id} could not be measured ({exc!r}): the fastest rung wins")
            return None
        self.progress(f"release {previous.id}: median of {len(values)} runs {benching.tok(runs.median)} tok/s, "
                      f"spread {benching.tok(runs.spread)}")
        return runs

    def run(self) -> TuneResult:
        session = HostSession.open(self.host, self.opts)
        conn = session.conn
        try:
            facts = probe_run.probe_on(conn, self.host)
            if (hw := hardware.assess(facts)).fault:  # nothing changed: no rung can be measured on a faulty GPU
                return TuneResult(self.host.name, DeployStatus.FAILED, attempts=[
                    Attempt("-", LogClass.GPU_FAULT, hw.evidence, 0)], error=f"{self.host.name}: GPU fault, nothing "
                    f"was changed: {hw.evidence} (inv recover --host {self.host.name})")
            unfit: list[str] = []  # said once: of the rungs' check in the venv the tune runs them in (below)
            rungs = self.serve.eligible(facts, unfit.append)
            where = node_of(ReleaseStore(conn, self.host).current())
            if where:
                raise FleetError(f"{self.host.name} is {where}: tuning it alone would restart one node of that "
                                 "server with a single-host playbook; nothing was changed")
            if self.serve.healthy(conn):
                n, seconds = restarts_estimate(conn, self.host, len(rungs))
                question = (f"{self.host.name} is serving: tuning {len(rungs)} rungs restarts it up to {n} times, "
                            f"{downtime_words(seconds)} of downtime in all. Go ahead?")
                if not self.confirm(question):
                    raise InputError(f"{self.host.name}: tune not confirmed; nothing was changed")
            unit = self.serve.unit
            with host_run(self.host, self.opts, f"tune {self.book.name}", unit=unit, session=session,
                          progress=self.progress, recover=deploy_recovery(self.book, unit, self.progress)) as run:
                if self.book.packages:  # every rung in the pins' venv, built now (before anything is stopped)
                    facts = self.pinned(conn)
                    unfit.clear()
                    rungs = self.serve.eligible(facts, unfit.append)
                for line in unfit:
                    self.progress(line)
                return self._tune(run, facts, rungs)
        finally:
            session.close()

    def pinned(self, conn: Connection) -> HostFacts:
        """`packages:`: the pins' venv (built when the host has none, nothing stopped), the host probed in it."""
        try:
            self.serve, venv = with_pins(conn, self.serve, self.progress)
        except venvs.VenvError as exc:
            raise FleetError(f"{exc}; nothing was stopped") from None
        self.host = self.serve.host
        self.runner.serve_from(self.serve, self.serve.gate(compare_history=False))
        self.venv = venv.record(timed=False)
        return probe_run.probe_on(conn, self.host)

    def _tune(self, host_run: HostRun, facts: HostFacts, rungs: list[Rung]) -> TuneResult:
        conn = host_run.session.conn
        key = fingerprint.key(fingerprint.of(facts))
        store = ReleaseStore(conn, self.host)
        previous = store.current()
        release = Release(id=new_id(), host=self.host.name, playbook=self.book.name,
                          playbook_sha256=self.serve.book_sha, created=now(),
                          facts={**facts_summary(facts), "fingerprint": key})
        if self.book.packages:
            release.runs_in(self.serve.venv)
        rungs, refused = preflight.check(conn, self.host, self.book, self.serve.venv, self.serve.unit, facts, rungs,
                                         self.progress)
        result = TuneResult(self.host.name, DeployStatus.FAILED, fingerprint=key, attempts=list(refused),
                            venv=self.venv if self.book.packages else None)
        if not rungs:
            return replace(result, error=f"{self.host.name}: no rung of {self.book.name} can run here; nothing was "
                                         "changed")
        baseline = None  # only the same playbook's release is comparable (the same model, the same bench)
        if self.hooks is not None:  # before anything is measured or stopped: the replica alone, no client sent
            self.hooks.take_out(self.host, conn, self.progress)
        try:
            with parallel.interruptible():  # nothing changed yet: a Ctrl-C here leaves the host as it is
                parallel.checkpoint()
                if (previous is not None and previous.playbook == self.book.name and self.runs >= 1
                        and self.serve.healthy(conn)):
                    baseline = self.measure_serving(conn, previous)
                    if baseline is not None:
                        result = replace(result, baseline=TuneBaseline(previous.id, previous.rung, baseline))
                parallel.checkpoint()
        except KeyboardInterrupt:
            self.progress(untouched(previous))
            raise
        run = host_run.open_release(store, release, tune=True, rungs=[r.name for r in rungs])
        draft = Draft(replace(result, release=release.id))  # an exception may end the climb
        try:
            return self._climb(conn, run, rungs, facts, draft.result, previous, baseline, draft)
        except ConnectionLost:
            raise  # the next run's recovery finds the release in progress
        except Exception as exc:  # any step after the stop: the previous release goes back
            return self._failed(conn, run, draft.result, previous, exc)

    def _failed(self, conn: Connection, run: ReleaseRun, result: TuneResult, previous: Release | None,
                exc: Exception) -> TuneResult:
        """A step failed: before anything was stopped, the error is raised (the release closed failed); after,
        the previous release goes back and the result says so."""
        if not self.runner.touched:
            with suppress(Exception):  # the error to report is the first; an unclosed release is recovered
                run.fail()
            raise exc
        why = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        self.progress(f"{why}; falling back")
        return result.ended_on(self.fall_back(conn, run.store, run.release, previous, why))

    def _climb(self, conn: Connection, run: ReleaseRun, rungs: list[Rung], facts: HostFacts, result: TuneResult,
               previous: Release | None, baseline: Runs | None = None, draft: Draft | None = None) -> TuneResult:
        """Each rung in turn, the `draft` as each attempt leaves it; then the winner, kept or the release before
        put back."""
        store, release = run.store, run.release
        planned = {}
        fault = False
        self.runner.key_by(facts)  # the key of each trial's warm start (serve.warm_start)
        draft = draft or Draft(result)
        try:
            with parallel.interruptible():  # Ctrl-C is taken between steps (fleet.parallel.checkpoint)
                for i, rung in enumerate(rungs):
                    parallel.checkpoint()
                    self.progress(f"rung {i + 1} of {len(rungs)}: {rung.name}")  # where the tune stands in its ladder
                    attempt, planned[rung.name] = self.runner.attempt(conn, run, rung, sglang_version(facts))
                    parallel.checkpoint()
                    attempt = self.repeat(conn, attempt)
                    # after the runs: a GPU may die
                    attempt, fault = self.runner.judge_hardware(conn, run, attempt, facts)
                    result = draft.now(replace(result, attempts=[*result.attempts, attempt]))
                    run.record(attempt)
                    if fault:
                        break
                    parallel.checkpoint()
        except KeyboardInterrupt:  # the rung under test never stays: the release that served before comes back
            if not self.runner.touched:  # no rung started: nothing was stopped, nothing to put back
                self.progress(untouched(previous))
                with suppress(Exception):  # the tune's own release, closed interrupted (an unclosed one is recovered)
                    run.fail(ReleaseStatus.INTERRUPTED)
                raise
            self.progress("interrupted: putting back the release that served before the tune")
            fell = self.fall_back(conn, store, release, previous, "tune interrupted", ReleaseStatus.INTERRUPTED)
            self.progress(fell.said_as(self.host.name))
            raise
        if fault:  # no winner on hardware that just failed, and nothing learned of the rungs it failed
            release.tried([a.to_json() for a in result.attempts])
            return result.ended_on(self.fall_back(conn, store, release, previous,
                                                   f"GPU fault: {result.attempts[-1].evidence}"))
        tried, best, decisions = pick(result.attempts, self.spec.fraction, self.spec.min_gain)
        release.tried([a.to_json() for a in tried])
        kept = None
        if best is not None and baseline is not None and previous is not None and (best_runs := runs_of(best)):
            held = f"release {previous.id} (serving before)"
            choice = noise.choose([(held, baseline), (best.rung, best_runs)], self.spec.min_gain)
            decisions += choice.decisions
            kept = previous if choice.winner == 0 else None
        result = draft.now(replace(result, attempts=tried, decisions=decisions))
        for line in result.decisions:
            self.progress(line)
        return self._settle(conn, run, facts, result, previous, kept, best, planned, draft)

    def _settle(self, conn: Connection, run: ReleaseRun, facts: HostFacts, result: TuneResult,
                previous: Release | None, kept: Release | None, best: Attempt | None,
                planned: dict[str, Planned], draft: Draft) -> TuneResult:
        """The rungs judged: the release before kept, or the winner serving (started again when another rung
        ran last), or the release before put back."""
        store, release = run.store, run.release
        if kept is not None:
            return self._keep(conn, run, facts, result, kept)
        if best is not None:
            best_runs = runs_of(best)
            result = draft.now(replace(result, winner=best.rung, winner_tok_s=tok_s(best),
                                       winner_spread=best_runs.spread if best_runs else None))
            self.progress(f"winner: {best.rung} at {benching.tok(tok_s(best) or 0)} tok/s")
            final_ok = True
            if result.attempts[-1] is not best:  # the server now runs another rung: start the winner again
                self.progress(f"starting {best.rung} again")
                final, _ = self.runner.attempt(conn, run, self.book.rung(best.rung), sglang_version(facts),
                                               measure=False)
                result = draft.now(replace(result, final=final))
                release.add_attempt({**final.to_json(), "final": True})
                final_ok = final.outcome == Outcome.READY
            if final_ok:
                run.succeed(best.rung, planned[best.rung].config, self.book.keep_releases, tune=True)
                try:  # the winner serves and is current: what follows is a record, never a reason to stop it
                    if best.bench:
                        benching.store_in_release(conn, self.host, release.dir,
                                                  replace(best.bench, release=release.id, rung=best.rung))
                    fingerprint.remember(self.book, facts, self.host.name, release.id, release.attempts)
                except (FleetError, OSError, ValueError) as exc:
                    self.progress(f"note: the winner serves, but its record was not kept: {exc}")
                if self.book.packages:  # venvs no kept release names go, as after a deploy
                    prune_venvs(conn, self.host, self.progress)
                return replace(result, status=DeployStatus.OK)
        return result.ended_on(self.fall_back(conn, store, release, previous, "no rung served"))

    def _keep(self, conn: Connection, run: ReleaseRun, facts: HostFacts, result: TuneResult,
              previous: Release) -> TuneResult:
        """No rung beats the release that served before beyond the noise: it goes back (byte for byte, restarted,
        verified) and stays current; the tune's release is closed as failed; what the rungs showed is learned."""
        why = f"no rung beats release {previous.id} beyond the noise"
        fell = self.fall_back(conn, run.store, run.release, previous, why)
        result = result.ended_on(fell)
        if fell.served_again:
            result = replace(result, status=DeployStatus.UNCHANGED, error=None)
        try:
            fingerprint.remember(self.book, facts, self.host.name, run.release.id, run.release.attempts)
        except (FleetError, OSError, ValueError) as exc:
            self.progress(f"note: what the rungs showed was not kept: {exc}")
        return result


TUNE_ENDS = ("a server start, a benchmark or a load point ends within its budget; then the release that served "
             "before the tune is put back")
TUNE_LEFT = ("its tune is left mid-step, its release in progress: the next deploy or rollback there puts back the "
             "release that served")


def tune_hosts(hosts: Sequence[Host], book: Playbook, path: Path, opts: ConnectOptions, secrets: dict[str, str],
               progress_for: Callable[[Host], Progress], confirm: Callable[[str], bool],
               runs: int | None = None, tuner: type[Tuner] | None = None) -> list[TuneResult]:
    """One host at a time (each may ask first); a host that fails is a result with its error, bad input
    (or a tune not confirmed) raises. `tuner`: what tunes a host (Tuner)."""
    tuner_of = tuner or Tuner
    def ask(question: str) -> bool:  # at the terminal, on the main thread: a Ctrl-C there ends the tune at once
        return parallel.on_main(lambda: confirm(question))

    hooks = routing.hooks_for(hosts, book, path, opts, secrets, progress_for)

    under_way: list[str] = []  # the host whose tune runs now, for the Ctrl-C's answer

    def each() -> list[TuneResult]:
        results = []
        for host in hosts:
            with parallel.interruptible():
                parallel.checkpoint()  # no later host is started after a Ctrl-C
            under_way[:] = [host.name]
            status = DeployStatus.FAILED
            try:
                results.append(tuner_of(host, book, path, opts, progress_for(host), secrets, ask, runs, hooks).run())
                status = results[-1].status
            except InputError:
                raise
            except FleetError as exc:
                results.append(TuneResult(host.name, DeployStatus.FAILED, error=str(exc)))
            finally:
                if hooks is not None:  # back in once it serves (the winner, or the release put back)
                    routing.back_in(hooks, host, status)
        return results

    # on a worker thread: a Ctrl-C never lands inside an SSH exchange (fleet.parallel.on_worker says why)
    return parallel.on_worker(each, lambda: ", ".join(under_way), TUNE_ENDS, TUNE_LEFT)
