"""`inv deploy` on one host: take it to a healthy sglang on the best rung of the ladder that works there.

lock -> recover what a dead run left -> probe -> preflight (nothing touched yet) -> open a release -> per
rung: stop and empty the GPUs, set patch sets, install unit and env atomically, restart, follow the journal
under per-phase budgets (fleet.logs.journal), check health and a known answer, the bench gate -> release
current, or fall back to the previous release (fleet.deploy.restore). docs/architecture.md draws the flow.
"""

from __future__ import annotations

import difflib
import time
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from fabric import Connection
from paramiko import SSHException

from fleet.deploy import bench as benching
from fleet.deploy import fingerprint, hardware, preflight, restore
from fleet.deploy.health import health_check
from fleet.deploy.hostrun import HostRun, deploy_recovery, host_run
from fleet.deploy.perfgate import PerfGate
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt, DeployResult, Planned, bench_point
from fleet.errors import FleetError
from fleet.host import probe_run, venvs
from fleet.host.facts import HostFacts, stack_versions
from fleet.host.releases import Release, ReleaseStore, new_id, node_of, now, versions_of
from fleet.host.render import API_KEY, UnitSpec, env_file, key_file, render_env, render_unit, server_argv, unit_file
from fleet.host.service import read_file, sha256, stop_and_empty_gpus, unit_state
from fleet.host.session import HostSession
from fleet.inventory import Host
from fleet.logs import journal
from fleet.logs.redact import env_text as redact_env
from fleet.logs.rules import LogClass
from fleet.outcomes import DeployStatus, Outcome
from fleet.patches import engine as patches
from fleet.patches import sets as patchsets
from fleet.playbook import (
    Playbook,
    Rung,
    flag_args,
    host_env,
    merged_flags,
    plain_env,
    secret_names,
    sglang_version,
    shown_env,
)
from fleet.progress import Progress, quiet
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import ConnectionLost


def facts_summary(facts: HostFacts) -> dict[str, Any]:
    """What a release records of the host it was made on."""
    return {"gpus": len(facts.gpus), "sm": sorted({g.sm for g in facts.gpus if g.sm}),
            "arch_family": facts.arch_family, "interconnect": facts.interconnect, "p2p": facts.p2p,
            "driver": facts.driver_version, "versions": stack_versions(facts)}


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


class Deployer:
    def __init__(self, host: Host, book: Playbook, book_path: Path, opts: ConnectOptions,
                 progress: Progress = quiet, secrets: dict[str, str] | None = None):
        self.host, self.book, self.opts, self.progress = host, book, opts, progress
        self.origin = host  # as the inventory gives it (a release without pins is put back in its venv)
        self.book_sha = sha256(book_path.read_bytes())
        self.unit = book.serve.unit or host.unit
        self.venv = book.serve.venv or host.venv
        self.unit_path, self.env_path, self.key_path = unit_file(self.unit), env_file(self.unit), key_file(self.unit)
        self.secrets = secrets or {}
        self.extra_args: list[str] = []  # per-node sglang flags of a multi-node deployment (fleet.multihost.multinode)
        self.measure: bool | None = None  # benchmark after health: None = as the playbook's bench.gate says
        self.bench_key = self.key_path if book.serve.api_key else None  # the benchmark's key, read on the host
        self.gate = PerfGate(host, book, self.venv, self.bench_key)
        self.facts: HostFacts | None = None  # as probed by this run (a host that served teaches its fingerprint)
        self.touched = False  # an attempt of this run stopped the server (before that, the host is as it was)

    # ------------------------------------------------------------------ planning (pure)
    def plan(self, rung: Rung, release_id: str) -> Planned:
        flags = merged_flags(self.book.flags, rung, sglang_version(self.facts))
        key = self.secrets.get(API_KEY)
        argv = server_argv(f"{self.venv}/bin/python", "sglang.launch_server",
                           ["--model-path", self.book.model.path, "--host", self.book.serve.host,
                            "--port", str(self.book.serve.port), *flag_args(flags), *self.extra_args],
                           keyed=key is not None)
        env = {**plain_env(self.book, rung, self.secrets), **host_env(self.host.vars)}
        spec = UnitSpec(playbook=self.book.name, rung=rung.name, release=release_id, user=self.book.serve.user,
                        workdir="/" if self.book.serve.user == "root" else f"/home/{self.book.serve.user}",
                        env_file=self.env_path, argv=argv, env=env, key_file=self.key_path if key else None,
                        stop_timeout=int(self.book.budgets.stop))
        config = {"playbook": self.book.name, "rung": rung.name, "flags": flags, "patches": rung.patches,
                  "env": shown_env(env, secret_names(self.book))}
        return Planned(rung, argv, env, config, render_unit(spec), render_env(spec), key, spec.key_file)

    def eligible(self, facts: HostFacts) -> list[Rung]:
        """The ladder's rungs whose `when:` this host meets, in order."""
        self.facts = facts
        rungs = []
        for rung in self.book.ladder:
            why = rung.when.failed(facts)
            if why:
                self.progress(f"rung {rung.name}: not for this host ({why})")
            else:
                rungs.append(rung)
        return rungs

    def preflight(self, conn: Connection, facts: HostFacts, rungs: list[Rung]) -> tuple[list[Rung], list[Attempt]]:
        return preflight.check(conn, self.host, self.book, self.venv, self.unit, facts, rungs, self.progress)

    # ------------------------------------------------------------------ the run
    def run(self, dry_run: bool = False, force: bool = False) -> DeployResult:
        if dry_run:
            session = HostSession.open(self.host, self.opts)
            try:
                return self._dry_run(session.conn)
            finally:
                session.close()
        with host_run(self.host, self.opts, f"deploy {self.book.name}", unit=self.unit, progress=self.progress,
                      recover=deploy_recovery(self.book, self.unit, self.progress)) as run:
            result = self._deploy(run, force)
            result.recovered = run.recovered
            return result

    def key_unchanged(self, conn: Connection) -> bool:
        """The host's key file holds the key this run was given (a new key is a new release)."""
        key = self.secrets.get(API_KEY)
        return key is None or read_file(conn, self.host, self.key_path) == key.encode()

    def healthy(self, conn: Connection) -> bool:
        state = unit_state(conn, self.host, self.unit)
        return (state.get("ActiveState") == "active"
                and health_check(conn, self.host, self.book)[0] == Outcome.READY)

    def _deploy(self, host_run: HostRun, force: bool) -> DeployResult:
        conn = host_run.session.conn
        result = DeployResult(host=self.host.name)
        self.progress("probing")
        facts = probe_run.probe_on(conn, self.host)
        result.sglang = sglang_version(facts)
        store = ReleaseStore(conn, self.host)
        previous = store.current()
        result.versions = stack_versions(facts)
        result.versions_before = versions_of(previous.facts) if previous else {}
        if previous is not None:  # what the upgrade is measured against: the gate's record of what serves now
            result.bench_before = bench_point(benching.result_of(previous.to_json()), previous.id, previous.rung)
        where = node_of(previous) if self.book.nodes is None else None
        if where and not force:
            result.error = (f"{self.host.name} is {where}: {self.book.name} would serve it alone and leave the "
                            "other nodes without it; deploy or roll back that deployment with every node's --host, "
                            "or give --force to replace it here; nothing was changed")
            return result
        if (not force and previous and previous.playbook_sha256 == self.book_sha and self.key_unchanged(conn)
                and self.healthy(conn)):
            result.status, result.release, result.config = DeployStatus.UNCHANGED, previous.id, previous.config
            self.progress(f"release {previous.id} already serves this playbook and is healthy: nothing to do")
            return result
        if (hw := hardware.assess(facts)).fault:  # nothing changed: no rung can serve on a faulty GPU
            result.attempts.append(Attempt("-", LogClass.GPU_FAULT, hw.evidence, 0))
            result.error = (f"{self.host.name}: GPU fault, nothing was changed: {hw.evidence} "
                            f"(inv recover --host {self.host.name})")
            return result
        if self.book.packages:
            pinned = self.pinned_venv(conn, result)
            if pinned is None:
                return result
            facts = pinned
        rungs = self.eligible(facts)
        release = Release(id=new_id(), host=self.host.name, playbook=self.book.name,
                          playbook_sha256=self.book_sha, created=now(), facts=facts_summary(facts))
        if self.book.packages:
            release.facts["venv"] = self.venv
        rungs, refused = self.preflight(conn, facts, rungs)
        result.attempts += refused
        rungs, remembered = fingerprint.arrange(self.book, facts, rungs, self.progress)
        result.attempts += [Attempt(name, Outcome.PREFLIGHT, why, 0) for name, why in remembered]
        if not rungs:
            result.error = f"{self.host.name}: no rung of {self.book.name} can run here; nothing was changed"
            return result
        run = host_run.open_release(store, release, rungs=[r.name for r in rungs])
        result.release = release.id
        try:
            if self._climb(conn, run, rungs, result, facts):
                return result
        except ConnectionLost:
            raise  # nothing more can be done from here: the next run's recovery finds the release in progress
        except Exception as exc:  # any step after the stop: the previous release goes back, as when nothing served
            if not self.touched:
                with suppress(Exception):  # the error to report is the first; an unclosed release is recovered
                    run.fail()
                raise
            why = f"{type(exc).__name__ if not isinstance(exc, FleetError) else 'error'}: {_first_line(exc)}"
            self.progress(f"{why}; falling back")
            result.status, result.release, result.config, result.error = restore.fall_back(
                conn, self.origin, store, release, previous, self.book, self.unit, why, self.progress)
            return result
        if not self.touched:  # every rung failed before anything was stopped or written: leave the host be
            run.fail()
            result.status = DeployStatus.FAILED
            result.release, result.config = (previous.id, previous.config) if previous else (release.id, {})
            result.error = (f"{self.host.name}: every rung failed before anything on the host changed; it stays "
                            + (f"on release {previous.id}" if previous else "as it was"))
            return result
        result.status, result.release, result.config, result.error = restore.fall_back(
            conn, self.origin, store, release, previous, self.book, self.unit, "every rung failed", self.progress)
        return result

    def pinned_venv(self, conn: Connection, result: DeployResult) -> HostFacts | None:
        """`packages:`: the venv of the pins, built now when the host has none (before anything is stopped: a
        failure leaves the old server serving), then the host probed in it; None with result.error set."""
        try:
            venv = self.use_pins(conn)
        except venvs.VenvError as exc:
            result.error = f"{exc}; nothing was stopped"
            return None
        result.venv = {"path": venv.path, "built": venv.built, "sent": venv.sent, "bytes_sent": venv.bytes_sent,
                       "seconds": round(venv.seconds, 2)}
        facts = probe_run.probe_on(conn, self.host)
        result.versions, result.sglang = stack_versions(facts), sglang_version(facts)
        return facts

    def use_pins(self, conn: Connection) -> venvs.Venv:
        """The venv of the playbook's pins, built when the host has none (nothing stopped; VenvError with one
        line otherwise), made the one this run serves, probes, patches and benchmarks in."""
        venv = venvs.ensure(conn, self.origin, self.book.packages, self.progress)
        self.venv = venv.path
        self.host = replace(self.origin, venv=venv.path)
        self.gate = PerfGate(self.host, self.book, self.venv, self.bench_key)
        return venv

    def _climb(self, conn: Connection, run: ReleaseRun, rungs: list[Rung], result: DeployResult,
               facts: HostFacts) -> bool:
        """Try the rungs in order; True once one serves and its release is current."""
        last: str | None = None
        for rung in rungs:
            if not rung.worth_trying_after(last):
                self.progress(f"rung {rung.name}: not worth trying after {last}")
                continue
            attempt, planned = self.attempt(conn, run, rung)
            self.judge_hardware(conn, run, attempt, facts)
            result.attempts.append(attempt)
            run.record(attempt.to_json())
            if attempt.outcome == Outcome.READY:
                note = run.succeed(rung.name, planned.config, self.book.keep_releases)
                if note:
                    self.progress(note)
                if self.book.packages:
                    self.prune_venvs(conn)
                result.status, result.config = DeployStatus.OK, planned.config
                return True
            last = attempt.outcome
            if last == LogClass.GPU_FAULT:
                break
        return False

    def prune_venvs(self, conn: Connection) -> None:
        """Venvs no kept release names are dropped; the release stands whatever happens here."""
        try:
            if dropped := venvs.prune(conn, self.host):
                self.progress(f"pruned venvs no release refers to: {', '.join(dropped)}")
        except FleetError as exc:
            self.progress(f"pruning venvs failed (the release stands): {exc}")

    def judge_hardware(self, conn: Connection, run: ReleaseRun, attempt: Attempt, facts: HostFacts) -> bool:
        """An attempt that did not serve, and the hardware failed under it: it becomes GPU_FAULT (True), which
        ends the ladder and is never learned as the rung's failure."""
        if attempt.outcome == Outcome.READY or not (fault := self.hardware_after(conn, facts)):
            return False
        attempt.outcome, attempt.evidence = LogClass.GPU_FAULT, f"{fault} (the server said: {attempt.evidence})"
        run.event("attempt", rung=attempt.rung, outcome=attempt.outcome, evidence=attempt.evidence)
        self.progress(f"{attempt.outcome}: {fault}; no further rungs (the hardware, not the flags)")
        return True

    def hardware_after(self, conn: Connection, before: HostFacts) -> str | None:
        """After an attempt that did not serve, one more probe: did the hardware fail under it?"""
        self.progress("probing the GPUs again after the failed attempt")
        try:
            after = probe_run.probe_on(conn, self.host)
        except (FleetError, EOFError, OSError, SSHException) as exc:  # the host may go down with its GPU
            self.progress(f"could not probe again: {exc}")
            return None
        return "; ".join(hardware.new_faults(before, after)) or None

    # ------------------------------------------------------------------ one attempt
    def attempt(self, conn: Connection, run: ReleaseRun, rung: Rung) -> tuple[Attempt, Planned]:
        start = time.monotonic()
        release = run.release
        planned = self.plan(rung, release.id)
        def say(message: str) -> None:
            self.progress(f"[{rung.name}] {message}")

        why = restore.unit_problem(conn, self.host, planned, self.unit_path)
        if why:  # e.g. a venv without bin/python: nothing stopped, nothing written; the ladder goes on
            say(f"{Outcome.INSTALL_FAILED}: {why}")
            return Attempt(rung.name, Outcome.INSTALL_FAILED, why, time.monotonic() - start), planned
        say("stopping the running server and emptying the GPUs")
        self.touched = True
        run.event("stop", rung=rung.name)
        stop_and_empty_gpus(conn, self.host, self.unit, self.book.budgets.stop, say)
        problem = restore.set_patches(conn, self.host, rung.patches, say)
        if problem:
            return Attempt(rung.name, Outcome.PREFLIGHT, problem, time.monotonic() - start), planned
        release.patches = {"sets": list(rung.patches), "files": restore.patched_files(conn, self.host)}
        try:
            restore.install(conn, self.host, run.store, release, planned, self.unit_path, self.env_path)
        except restore.InstallError as exc:  # e.g. a full disk: the next rung or the fall-back puts a release back
            return Attempt(rung.name, Outcome.INSTALL_FAILED, str(exc), time.monotonic() - start), planned
        run.event("installed", rung=rung.name, files=release.files)
        cursor = journal.cursor(conn, self.host)
        restore.restart(conn, self.host, self.unit)
        run.event("restarted", rung=rung.name)
        say("started; following the journal")
        outcome, evidence = journal.watch(conn, self.host, self.unit, cursor, self.book.budgets, say,
                                          sglang=sglang_version(self.facts))
        if outcome == Outcome.READY:
            outcome, evidence = health_check(conn, self.host, self.book)
        record = None
        measure = self.measure if self.measure is not None else bool(self.book.bench and self.book.bench.gate)
        if outcome == Outcome.READY and measure:
            outcome, evidence, record = self.gate.check(conn, rung, evidence, say)
        run.event("attempt", rung=rung.name, outcome=outcome, evidence=evidence)
        say(f"{outcome}: {evidence}")
        return Attempt(rung.name, outcome, evidence, time.monotonic() - start, record), planned

    # ------------------------------------------------------------------ dry run
    def _dry_run(self, conn: Connection) -> DeployResult:
        facts = probe_run.probe_on(conn, self.host)
        venv_note = ""
        if self.book.packages:  # the unit would name the pins' venv; nothing is sent or built
            try:
                self.venv, there = venvs.planned(conn, self.host, self.book.packages)
            except venvs.VenvError as exc:
                return DeployResult(self.host.name, DeployStatus.FAILED, error=str(exc))
            venv_note = f"venv {self.venv}: " + ("there, used as it is\n" if there else "would be built\n")
        rungs = self.eligible(facts)
        if not rungs:
            return DeployResult(self.host.name, DeployStatus.FAILED, error="no rung of the ladder fits this host")
        planned = self.plan(rungs[0], "dry-run")
        diffs: list[str] = []
        names = secret_names(self.book)
        for path, new in ((self.unit_path, planned.unit_text), (self.env_path, planned.env_text)):
            old = read_file(conn, self.host, path)
            old_text, new = (redact_env(old, names) if old is not None else ""), redact_env(new, names)
            diffs += difflib.unified_diff(old_text.splitlines(True), new.splitlines(True),
                                          fromfile=f"{path} (installed)", tofile=f"{path} ({rungs[0].name})")
        for name in rungs[0].patches:
            res = patches.check_host(conn, self.host, patchsets.load_sets([name]))
            for sp in res.sets:
                diffs.append(f"patch set {sp.name}: {sp.state}" + (f" ({sp.reason})" if sp.reason else "") + "\n")
        return DeployResult(self.host.name, DeployStatus.DRY_RUN, config=planned.config,
                            diff=venv_note + "".join(diffs))
