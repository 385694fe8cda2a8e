"""One rung tried on a host: stop and empty the GPUs -> set patch sets -> install unit and env atomically ->
restart -> follow the journal under per-phase budgets -> health and a known answer -> the bench gate. The ladder
(fleet.deploy.ladder), the tuner and the router's replica deploys compose it; none changes a step of it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from fabric import Connection
from paramiko import SSHException

from fleet.deploy import hardware, health, restore
from fleet.deploy.cachekey import NoKey
from fleet.deploy.cachestore import CacheStore
from fleet.deploy.perfgate import PerfGate
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt, Planned
from fleet.deploy.serving import Serving
from fleet.deploy.warmstart import WarmStart
from fleet.errors import FleetError
from fleet.host import kcache, probe_run
from fleet.host.facts import HostFacts
from fleet.host.service import stop_and_empty_gpus
from fleet.logs import journal
from fleet.logs.rules import LogClass
from fleet.logs.warmphases import PhaseClock
from fleet.outcomes import Outcome
from fleet.playbook import Rung
from fleet.progress import Progress, prefixed, ticking

BeforeStop = Callable[[Connection], None]  # what must happen before the server first stops (out of the router)


class AttemptRunner:
    """Tries rungs for one run on one host. `measure`: benchmark after health (None: as the playbook's
    bench.gate says); `before_stop`: called before each stop. `touched`: an attempt of this run stopped the
    server (before that, the host is as it was)."""

    def __init__(self, serve: Serving, progress: Progress, gate: PerfGate | None = None,
                 measure: bool | None = None, before_stop: BeforeStop | None = None) -> None:
        self.serve, self.progress, self.measure, self.before_stop = serve, progress, measure, before_stop
        self.gate = gate or serve.gate()
        self.touched = False
        self.facts: HostFacts | None = None  # as this run probed the host: its warm start's key (issue 49)

    def key_by(self, facts: HostFacts) -> None:
        """The host as this run probed it: the key of its attempts' warm starts (serve.warm_start)."""
        self.facts = facts

    def serve_from(self, serve: Serving, gate: PerfGate) -> None:
        """The run serves from another venv (the pins'): its attempts, and their gate, go there."""
        self.serve, self.gate = serve, gate

    def attempt(self, conn: Connection, run: ReleaseRun, rung: Rung, sglang: str | None,
                measure: bool | None = None) -> tuple[Attempt, Planned]:
        start = time.monotonic()
        serve, host = self.serve, self.serve.host
        release = run.release
        planned = serve.plan(rung, release.id, sglang)

        def say(message: str) -> None:
            self.progress(prefixed(f"[{rung.name}] ", message))

        why = restore.unit_problem(conn, host, planned, serve.unit_path)
        if why:  # e.g. a venv without bin/python: nothing stopped, nothing written; the ladder goes on
            say(f"{Outcome.INSTALL_FAILED}: {why}")
            return Attempt(rung.name, Outcome.INSTALL_FAILED, why, time.monotonic() - start), planned
        if self.before_stop is not None:
            self.before_stop(conn)
        say("stopping the running server and emptying the GPUs")
        self.touched = True
        run.event("stop", rung=rung.name)
        with ticking(say, "stop", serve.book.budgets.stop):
            stop_and_empty_gpus(conn, host, serve.unit, serve.book.budgets.stop, say)
        problem = restore.set_patches(conn, host, rung.patches, say)
        if problem:
            return Attempt(rung.name, Outcome.PREFLIGHT, problem, time.monotonic() - start), planned
        release.patched(list(rung.patches), restore.patched_files(conn, host))
        try:
            restore.install(conn, host, run.store, release, planned, serve.unit_path, serve.env_path)
        except restore.InstallError as exc:  # e.g. a full disk: the next rung or the fall-back puts a release back
            return Attempt(rung.name, Outcome.INSTALL_FAILED, str(exc), time.monotonic() - start), planned
        run.event("installed", rung=rung.name, files=release.files)
        warm = self.warm_start(conn, rung, planned, say)
        release.keyed(warm.key.digest if warm is not None else None)  # saved with the attempt (run.record)
        if warm is not None:
            warm.needed_by(host, release.id, say)
            warm.before_start(conn, host, say)
        seen = PhaseClock()
        outcome, evidence = self._start(conn, run, rung, sglang, say, warm, seen)
        if outcome != Outcome.READY and warm is not None and warm.without_cache(conn, host, say):
            run.event("cold-retry", rung=rung.name, evidence=evidence)
            stop_and_empty_gpus(conn, host, serve.unit, serve.book.budgets.stop, say)
            seen = PhaseClock()
            outcome, evidence = self._start(conn, run, rung, sglang, say, warm, seen)
        if outcome == Outcome.READY:
            outcome, evidence = health.verify(conn, host, serve.book, say)
        if outcome == Outcome.READY and warm is not None:
            warm.check_used(conn, host, say)
            warm.after_serving(conn, host, say, seen.times())
        record = None
        measure = measure if measure is not None else self.measure
        measure = measure if measure is not None else bool(serve.book.bench and serve.book.bench.gate)
        if outcome == Outcome.READY and measure:
            outcome, evidence, record = self.gate.check(conn, rung, evidence, say)
        run.event("attempt", rung=rung.name, outcome=outcome, evidence=evidence)
        say(f"{outcome}: {evidence}")
        return Attempt(rung.name, outcome, evidence, time.monotonic() - start, record), planned

    def _start(self, conn: Connection, run: ReleaseRun, rung: Rung, sglang: str | None,
               say: Callable[[str], None], warm: WarmStart | None, seen: PhaseClock) -> tuple[str, str]:
        """The server started and watched through its phases (`seen` gets them; a warm start's are judged)."""
        serve, host = self.serve, self.serve.host
        cursor = journal.cursor(conn, host)
        restore.restart(conn, host, serve.unit)
        run.event("restarted", rung=rung.name)
        say("started; following the journal")
        expect = warm.expect if warm is not None else journal.COLD
        return journal.watch(conn, host, serve.unit, cursor, serve.book.budgets, say, sglang=sglang, expect=expect,
                             seen=seen)

    def warm_start(self, conn: Connection, rung: Rung, planned: Planned,
                   say: Callable[[str], None]) -> WarmStart | None:
        """The warm start of this attempt, when the playbook asks for one and the host has a key."""
        if not self.serve.book.serve.warm_start or self.facts is None:
            return None
        user = self.serve.book.serve.user
        home = planned.env.get("HOME") or kcache.home(conn, self.serve.host, user)  # systemd's User= sets HOME
        if home is None:
            say(f"cold start: the home of {user} on the host is not known (getent passwd {user})")
            return None
        store = CacheStore.of_site()
        got = WarmStart.of(store, self.facts, list(rung.patches), planned.argv, planned.env, self.serve.venv,
                           user, home)
        if isinstance(got, NoKey):
            say(f"cold start: no cache key ({got.reason})")
            return None
        return got

    def judge_hardware(self, conn: Connection, run: ReleaseRun, attempt: Attempt,
                       facts: HostFacts) -> tuple[Attempt, bool]:
        """An attempt that did not serve, and the hardware failed under it: it becomes GPU_FAULT (True), which
        ends the ladder and is never learned as the rung's failure; else the attempt as it was (False)."""
        if attempt.outcome == Outcome.READY or not (fault := self.hardware_after(conn, facts)):
            return attempt, False
        attempt = replace(attempt, outcome=LogClass.GPU_FAULT,
                          evidence=f"{fault} (the server said: {attempt.evidence})")
        run.event("attempt", rung=attempt.rung, outcome=attempt.outcome, evidence=attempt.evidence)
        self.progress(f"{attempt.outcome}: {fault}; no further rungs (the hardware, not the flags)")
        return attempt, True

    def hardware_after(self, conn: Connection, before: HostFacts) -> str | None:
        """After an attempt that did not serve, one more probe: did the hardware fail under it?"""
        self.progress("probing the GPUs again after the failed attempt")
        try:
            after = probe_run.probe_on(conn, self.serve.host, self.progress)
        except (FleetError, EOFError, OSError, SSHException) as exc:  # the host may go down with its GPU
            self.progress(f"could not probe again: {exc}")
            return None
        return "; ".join(hardware.new_faults(before, after)) or None
