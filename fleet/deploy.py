"""`inv deploy`: take a host to a healthy sglang on the best rung of the ladder that works there, or back.

lock -> probe -> plan and preflight (nothing touched yet) -> open a release -> per rung: stop and empty
the GPUs, apply/revert patch sets, install unit and env atomically, restart, follow the journal with the
classifier under per-phase budgets, check health and a known answer -> release current, or roll back.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fabric import Connection
from paramiko import SSHException

from fleet import bench as benching
from fleet import faulthook, fingerprint, hostlock, patches, patchsets, phases, probe_run, recovery
from fleet.connect import ConnectOptions, open_connection
from fleet.errors import FleetError
from fleet.facts import HostFacts, known_bad
from fleet.inventory import Host
from fleet.logclassify import LineClassifier
from fleet.logrules import LogClass, Severity
from fleet.playbook import Bench, Playbook, Rung, flag_args, host_env, merged_flags
from fleet.releases import Release, ReleaseStore, new_id
from fleet.remedies import remedy_for
from fleet.remote import lost_link
from fleet.render import API_KEY_VAR, UnitSpec, render_env, render_unit
from fleet.service import (
    Follower,
    ServiceError,
    daemon_reload,
    journal_cursor,
    read_file,
    sh,
    sha256,
    stop_and_empty_gpus,
    unit_state,
    verify_unit,
    write_atomic,
)

Progress = Callable[[str], None]


@dataclass
class Attempt:
    rung: str
    outcome: str  # READY, a logwatch class, HANG, WRONG_ANSWER, EXITED, HEALTH_FAILED, PREFLIGHT,
    # PERF_REGRESSION or BENCH_FAILED
    evidence: str
    seconds: float
    bench: dict[str, Any] | None = None  # the performance gate's record (fleet.bench.run + verdict)

    def to_json(self) -> dict[str, Any]:
        out = {**asdict(self), "seconds": round(self.seconds, 1)}
        if self.bench is None:
            out.pop("bench")
        return out


@dataclass
class DeployResult:
    host: str
    status: str  # ok | unchanged | rolled_back | failed | dry-run
    release: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    error: str | None = None
    diff: str | None = None
    recovered: list[str] = field(default_factory=list)  # what a dead earlier run left, and how it was closed

    def to_json(self) -> dict[str, Any]:
        out = {"host": self.host, "status": self.status, "release": self.release, "config": self.config,
               "attempts": [self._attempt_json(a) for a in self.attempts], "error": self.error}
        if self.diff is not None:
            out["diff"] = self.diff
        if self.recovered:
            out["recovered"] = self.recovered
        return out

    def _attempt_json(self, a: Attempt) -> dict[str, Any]:
        """An attempt that failed carries its remedy, the next thing to try, as the summary shows it."""
        out = a.to_json()
        if a.outcome != "READY" and (a.outcome != "PREFLIGHT" or self.status == "failed"):
            if remedy := remedy_for(a.outcome, a.evidence):
                out["remedy"] = remedy
        return out


@dataclass
class Planned:
    rung: Rung
    argv: list[str]
    env: dict[str, str]
    config: dict[str, Any]
    unit_text: str
    env_text: str


class Deployer:
    def __init__(self, host: Host, book: Playbook, book_path: Path, opts: ConnectOptions,
                 progress: Progress = lambda m: None, secrets: dict[str, str] | None = None):
        self.host, self.book, self.opts, self.progress = host, book, opts, progress
        self.book_sha = hashlib.sha256(book_path.read_bytes()).hexdigest()
        self.unit = book.serve.unit or host.unit
        self.venv = book.serve.venv or host.venv
        self.unit_path = f"/etc/systemd/system/{self.unit}.service"
        self.env_path = f"/etc/fleet/{self.unit}.env"
        self.secrets = secrets or {}
        self.extra_args: list[str] = []  # per-node sglang flags of a multi-node deployment (fleet.multinode)
        self.measure: bool | None = None  # benchmark after health: None = as the playbook's bench.gate says
        self.run_best: tuple[float, str] | None = None  # the fastest rung measured in this run
        self._history: list[tuple[float, str] | None] | None = None  # known-good result, looked up once

    # ------------------------------------------------------------------ planning (pure)
    def plan(self, rung: Rung, release_id: str) -> Planned:
        flags = merged_flags(self.book.flags, rung)
        argv = [f"{self.venv}/bin/python", "-m", "sglang.launch_server", "--model-path", self.book.model.path,
                "--host", self.book.serve.host, "--port", str(self.book.serve.port), *flag_args(flags),
                *self.extra_args]
        env = {**self.book.serve.env, **rung.env, **host_env(self.host.vars)}
        secret_args = {}
        if API_KEY_VAR in self.secrets:
            argv += ["--api-key", "secret"]
            secret_args = {len(argv) - 1: API_KEY_VAR}
            env[API_KEY_VAR] = self.secrets[API_KEY_VAR]
        spec = UnitSpec(playbook=self.book.name, rung=rung.name, release=release_id, user=self.book.serve.user,
                        workdir="/" if self.book.serve.user == "root" else f"/home/{self.book.serve.user}",
                        env_file=self.env_path, argv=argv, env=env, secret_args=secret_args,
                        stop_timeout=int(self.book.budgets.stop))
        config = {"playbook": self.book.name, "rung": rung.name, "flags": flags, "patches": rung.patches,
                  "env": {k: ("<secret>" if k == API_KEY_VAR else v) for k, v in env.items()}}
        return Planned(rung, argv, env, config, render_unit(spec), render_env(spec))

    def eligible(self, facts: HostFacts) -> list[Rung]:
        """The ladder's rungs whose `when:` this host meets, in order."""
        rungs = []
        for rung in self.book.ladder:
            why = rung.when.failed(facts)
            if why:
                self.progress(f"rung {rung.name}: not for this host ({why})")
            else:
                rungs.append(rung)
        return rungs

    # ------------------------------------------------------------------ the run
    def run(self, dry_run: bool = False, force: bool = False) -> DeployResult:
        conn = open_connection(self.host, self.opts)
        try:
            return self._run(conn, dry_run, force)
        except (EOFError, OSError, SSHException) as exc:  # an SFTP or channel call on a link that died
            lost_link(conn, self.host, "mid-deploy", exc)
            raise
        finally:
            conn.close()

    def _run(self, conn: Connection, dry_run: bool, force: bool) -> DeployResult:
        if dry_run:
            return self._dry_run(conn)
        with hostlock.held(conn, self.host, f"deploy {self.book.name}") as lock:
            recovered = recover_after_crash(conn, self.host, self.book, self.unit, lock, self.progress)
            result = self._deploy(conn, force)
            result.recovered = recovered
            return result

    def _deploy(self, conn: Connection, force: bool) -> DeployResult:
        result = DeployResult(host=self.host.name, status="failed")
        self.progress("probing")
        facts = probe_run.probe_on(conn, self.host)
        store = ReleaseStore(conn, self.host)
        previous = store.current()
        if not force and previous and previous.playbook_sha256 == self.book_sha and self._healthy(conn):
            result.status, result.release, result.config = "unchanged", previous.id, previous.config
            self.progress(f"release {previous.id} already serves this playbook and is healthy: nothing to do")
            return result
        rungs = self.eligible(facts)
        release = Release(id=new_id(), host=self.host.name, playbook=self.book.name,
                          playbook_sha256=self.book_sha, created=_now(),
                          facts={"gpus": len(facts.gpus), "sm": sorted({g.sm for g in facts.gpus if g.sm}),
                                 "arch_family": facts.arch_family, "interconnect": facts.interconnect,
                                 "p2p": facts.p2p, "driver": facts.driver_version})
        rungs, preflight = self._preflight(conn, facts, rungs, release.id)
        result.attempts += preflight
        rungs, remembered = fingerprint.arrange(self.book, facts, rungs, self.progress)
        result.attempts += [Attempt(name, "PREFLIGHT", why, 0) for name, why in remembered]
        if not rungs:
            result.error = f"{self.host.name}: no rung of {self.book.name} can run here; nothing was changed"
            return result
        store.open(release)
        store.event(release, {"step": "opened", "rungs": [r.name for r in rungs]})
        result.release = release.id
        last_class: str | None = None
        for i, rung in enumerate(rungs):
            if i and rung.after is not None and last_class not in rung.after:
                self.progress(f"rung {rung.name}: not worth trying after {last_class}")
                continue
            attempt, planned = self._attempt(conn, store, release, rung)
            result.attempts.append(attempt)
            release.attempts.append(attempt.to_json())
            store.save(release)
            if attempt.outcome == "READY":
                release.status, release.rung, release.config = "ok", rung.name, planned.config
                release.finished = _now()
                store.save(release)
                store.mark_current(release)
                store.prune(self.book.keep_releases)
                store.event(release, {"step": "current"})
                result.status, result.config = "ok", planned.config
                return result
            last_class = attempt.outcome
        result.status, result.release, result.config, result.error = fall_back(
            conn, self.host, store, release, previous, self.book, self.unit, "every rung failed", self.progress)
        return result

    def _healthy(self, conn: Connection) -> bool:
        state = unit_state(conn, self.host, self.unit)
        return state.get("ActiveState") == "active" and health_check(conn, self.host, self.book)[0] == "READY"

    # ------------------------------------------------------------------ preflight
    def _preflight(self, conn: Connection, facts: HostFacts, rungs: list[Rung],
                   release_id: str) -> tuple[list[Rung], list[Attempt]]:
        skipped: list[Attempt] = []
        if not facts.ok:
            return [], [Attempt("-", "PREFLIGHT", f"probe failed: {facts.error}", 0)]
        blocking = host_problems(facts)
        if blocking:
            return [], [Attempt("-", "PREFLIGHT", "; ".join(blocking), 0)]
        for warning in known_bad(facts):
            self.progress(f"warning: {warning}")
        known = known_flags(conn, self.host, self.venv)
        missing_model = model_problem(conn, self.host, self.book.model.path)
        if missing_model:
            return [], [Attempt("-", "PREFLIGHT", missing_model, 0)]
        port = port_problem(conn, self.host, self.book.serve.port, self.unit)
        if port:
            return [], [Attempt("-", "PREFLIGHT", port, 0)]
        sets_cache: dict[str, str | None] = {}
        kept = []
        for rung in rungs:
            flags = merged_flags(self.book.flags, rung)
            why = None
            unknown = sorted(f for f in flags if known is not None and f"--{f}" not in known)
            if unknown:
                why = f"flags not in the installed sglang: {', '.join('--' + f for f in unknown)}"
            elif (need := _int(flags.get("tp-size", flags.get("tensor-parallel-size", 1)))
                  * _int(flags.get("pp-size", flags.get("pipeline-parallel-size", 1)))
                  * _int(flags.get("dp-size", flags.get("data-parallel-size", 1)))) > len(facts.gpus) * (
                      self.book.nodes.count if self.book.nodes else 1):
                why = f"TP x PP x DP = {need} GPUs, host has {len(facts.gpus)}"
            else:
                for s in rung.patches:
                    if s not in sets_cache:
                        sets_cache[s] = patch_problem(conn, self.host, s)
                    if sets_cache[s]:
                        why = sets_cache[s]
                        break
            if why:
                self.progress(f"rung {rung.name}: preflight: {why}")
                skipped.append(Attempt(rung.name, "PREFLIGHT", why, 0))
            else:
                kept.append(rung)
        return kept, skipped

    # ------------------------------------------------------------------ one attempt
    def _attempt(self, conn: Connection, store: ReleaseStore, release: Release,
                 rung: Rung) -> tuple[Attempt, Planned]:
        start = time.monotonic()
        planned = self.plan(rung, release.id)
        say = lambda m: self.progress(f"[{rung.name}] {m}")  # noqa: E731
        say("stopping the running server and emptying the GPUs")
        store.event(release, {"step": "stop", "rung": rung.name})
        stop_and_empty_gpus(conn, self.host, self.unit, self.book.budgets.stop, say)
        problem = set_patches(conn, self.host, rung.patches, say)
        if problem:
            return Attempt(rung.name, "PREFLIGHT", problem, time.monotonic() - start), planned
        release.patches = {"sets": list(rung.patches), "files": patched_files(conn, self.host)}
        try:
            install(conn, self.host, store, release, planned, self.unit_path, self.env_path)
        except ServiceError as exc:  # e.g. a full disk: the next rung or the fall-back puts a whole release back
            return Attempt(rung.name, "INSTALL_FAILED", str(exc), time.monotonic() - start), planned
        store.event(release, {"step": "installed", "rung": rung.name, "files": release.files})
        cursor = journal_cursor(conn, self.host)
        sh(conn, self.host, f"systemctl reset-failed {shlex.quote(self.unit)} 2>/dev/null; "
                            f"systemctl restart {shlex.quote(self.unit)}")
        store.event(release, {"step": "restarted", "rung": rung.name})
        say("started; following the journal")
        outcome, evidence = watch(conn, self.host, self.unit, cursor, self.book, say)
        if outcome == "READY":
            outcome, evidence = health_check(conn, self.host, self.book)
        record = None
        measure = self.measure if self.measure is not None else bool(self.book.bench and self.book.bench.gate)
        if outcome == "READY" and measure:
            outcome, evidence, record = self._perf_gate(conn, rung, evidence, say)
        store.event(release, {"step": "attempt", "rung": rung.name, "outcome": outcome, "evidence": evidence})
        say(f"{outcome}: {evidence}")
        return Attempt(rung.name, outcome, evidence, time.monotonic() - start, record), planned

    def _perf_gate(self, conn: Connection, rung: Rung, evidence: str,
                   say: Progress) -> tuple[str, str, dict[str, Any] | None]:
        """After health: a short benchmark, compared with the host's last known-good result on the same
        settings, else the playbook's floor, else the best rung measured in this run."""
        spec = self.book.bench or Bench()
        say(f"benchmarking: {spec.num_prompts} prompts of {spec.input_len}+{spec.output_len} tokens, "
            f"concurrency {spec.max_concurrency}")
        try:
            record = benching.run(conn, self.host, self.book, spec, self.venv, self.env_path)
        except benching.BenchError as exc:
            return "BENCH_FAILED", str(exc), None
        if self._history is None:
            found, current = benching.manifests(conn, self.host)
            self._history = [benching.known_good(found, current, record["settings"])]
        measured = record["result"]["output_throughput"]
        verdict = benching.evaluate(measured, spec.fraction, self._history[0], spec.floor, self.run_best)
        if not verdict.ok and verdict.required and measured >= 0.75 * verdict.required:
            say(f"{benching.tok(measured)} tok/s is just short of {benching.tok(verdict.required)}: measuring again")
            try:  # a near miss may be noise: the better of two runs counts
                again = benching.run(conn, self.host, self.book, spec, self.venv, self.env_path)
            except benching.BenchError as exc:
                return "BENCH_FAILED", str(exc), None
            if again["result"]["output_throughput"] > measured:
                record, measured = again, again["result"]["output_throughput"]
            verdict = benching.evaluate(measured, spec.fraction, self._history[0], spec.floor, self.run_best)
            verdict.evidence += " (the better of 2 runs)"
        record["verdict"] = verdict.to_json()
        say(f"{benching.summary(record)}; {verdict.evidence}")
        if not verdict.ok:
            return "PERF_REGRESSION", verdict.evidence, record
        if self.run_best is None or measured > self.run_best[0]:
            self.run_best = (measured, f"rung {rung.name} in this run")
        return "READY", f"{evidence}; {verdict.evidence}", record

    # ------------------------------------------------------------------ dry run
    def _dry_run(self, conn: Connection) -> DeployResult:
        facts = probe_run.probe_on(conn, self.host)
        rungs = self.eligible(facts)
        if not rungs:
            return DeployResult(self.host.name, "failed", error="no rung of the ladder fits this host")
        planned = self.plan(rungs[0], "dry-run")
        diffs = []
        for path, new in ((self.unit_path, planned.unit_text), (self.env_path, _redact(planned.env_text))):
            old = read_file(conn, path)
            old_text = _redact(old.decode()) if old is not None else ""
            diffs += difflib.unified_diff(old_text.splitlines(True), new.splitlines(True),
                                          fromfile=f"{path} (installed)", tofile=f"{path} ({rungs[0].name})")
        for name in rungs[0].patches:
            res = patches.check_host(conn, self.host, patchsets.load_sets([name]))
            for sp in res.sets:
                diffs.append(f"patch set {sp.name}: {sp.state}" + (f" ({sp.reason})" if sp.reason else "") + "\n")
        return DeployResult(self.host.name, "dry-run", config=planned.config, diff="".join(diffs))


# ---------------------------------------------------------------------- steps shared with rollback


def install(conn: Connection, host: Host, store: ReleaseStore, release: Release, planned: Planned,
            unit_path: str, env_path: str) -> None:
    """Back up what is installed into the release, then write unit and env atomically and reload systemd."""
    sh(conn, host, f"mkdir -p -m 0700 {shlex.quote(env_path.rsplit('/', 1)[0])}")
    for path, text, mode in ((unit_path, planned.unit_text, 0o644), (env_path, planned.env_text, 0o600)):
        old = read_file(conn, path)
        if old is not None and f"before:{path}" not in release.files:
            store.keep_file(release, "before" + path, old, 0o600)
            release.files[f"before:{path}"] = {"sha256": sha256(old)}
        data = text.encode()
        write_atomic(conn, path, data, mode)
        store.keep_file(release, path, data, mode)
        release.files[path] = {"sha256": sha256(data), "mode": oct(mode)}
    complaint = verify_unit(conn, host, unit_path)
    if complaint:
        raise FleetError(f"{host.name}: systemd-analyze verify {unit_path}: {complaint.splitlines()[0]}")
    daemon_reload(conn, host)
    store.save(release)


def record_patch_release(conn: Connection, host: Host, action: str, sets: list[str]) -> str | None:
    """A standalone `inv patch` is a release of its own, so rollback covers it: the current release's unit
    and env as they are, with the patch sets as they now stand. None when nothing was deployed yet."""
    store = ReleaseStore(conn, host)
    current = store.current()
    if current is None:
        return None
    applied = list(current.config.get("patches", []))
    applied = [*applied, *(s for s in sets if s not in applied)] if action == "apply" else \
        [s for s in applied if s not in sets]
    release = Release(id=new_id(), host=host.name, playbook=current.playbook,
                      playbook_sha256=f"patched:{current.playbook_sha256}", created=_now(), status="ok",
                      rung=current.rung, config={**current.config, "patches": applied}, facts=current.facts,
                      finished=_now())
    store.open(release)
    for path, meta in current.files.items():
        data = None if path.startswith("before:") else store.file(current, path)
        if data is not None:
            store.keep_file(release, path, data, int(meta.get("mode", "0o600"), 8))
            release.files[path] = dict(meta)
    release.patches = {"sets": applied, "files": patched_files(conn, host)}
    release.attempts = [{"rung": "inv patch", "outcome": action, "evidence": " ".join(sets), "seconds": 0}]
    store.save(release)
    store.event(release, {"step": "patch", "action": action, "sets": sets, "after": current.id})
    store.mark_current(release)
    return release.id


def fall_back(conn: Connection, host: Host, store: ReleaseStore, release: Release, previous: Release | None,
              book: Playbook, unit: str, why: str, say: Progress) -> tuple[str, str, dict[str, Any], str]:
    """Nothing served: close the release as failed and go back to the previous known-good one, or leave the
    unit stopped when there is none. Returns (status, release the host is on, its config, error)."""
    release.status, release.finished = "failed", _now()
    store.save(release)
    stop_and_empty_gpus(conn, host, unit, book.budgets.stop, say)
    if previous is None:
        return "failed", release.id, {}, f"{host.name}: {why} and there is no earlier release; the unit is stopped"
    say(f"{why}: rolling back to {previous.id}")
    rolled = restore(conn, host, store, previous, book, say)
    if rolled.outcome == "READY":
        return "rolled_back", previous.id, previous.config, f"{host.name}: {why}; back on release {previous.id}"
    return ("failed", previous.id, previous.config,
            f"{host.name}: {why} and the rollback failed too: {rolled.outcome} {rolled.evidence}")


def recover_after_crash(conn: Connection, host: Host, book: Playbook, unit: str, lock: hostlock.Lock,
                        say: Progress) -> list[str]:
    """First thing under the lock: the dead run's lock we took over, and what that run left (fleet.recovery)."""
    notes = [lock.recovered] if lock.recovered else []
    if lock.recovered:
        say(lock.recovered)
    return notes + recovery.recover(conn, host, book, unit, say)


def patched_files(conn: Connection, host: Host) -> dict[str, str]:
    """sha256 of every file a known patch set manages, as it stands now: what a release records."""
    state = patches.read_state(conn, host, patchsets.load_sets(patchsets.available()))
    return {f.path: f.sha256 for f in state.files.values() if f.path and f.sha256}


def set_patches(conn: Connection, host: Host, wanted: list[str], say: Progress) -> str | None:
    """Apply the rung's patch sets and revert every other known set (a patched gate can enable fusion)."""
    others = [s for s in patchsets.available() if s not in wanted]
    for verb, names, step in (("reverted", others, patches.revert_host), ("applied", wanted, patches.apply_host)):
        if not names:
            continue
        res = step(conn, host, patchsets.load_sets(names), lock=False)
        if res.written:
            say(f"{verb} patch sets {', '.join(names)} ({len(res.written)} files)")
        if not res.ok:
            return res.error
    return None


def watch(conn: Connection, host: Host, unit: str, cursor: str, book: Playbook, say: Progress,
          stop: threading.Event | None = None) -> tuple[str, str]:
    """Follow the journal until READY, a fatal class, the unit ending, or a phase outliving its budget (or
    `stop` is set: another node of a multi-node server failed)."""
    follower = Follower(conn, host, unit, cursor)
    classifier = LineClassifier()
    phase, phase_start, last_line, last_state_check = "start", time.monotonic(), "", time.monotonic()
    warned: dict[str, int] = {}
    try:
        while True:
            lines = follower.lines(timeout=0.5)
            if stop is not None and stop.is_set():
                return "STOPPED", "another node of the deployment failed"
            if lines is None:
                return "EXITED", "the journal stream ended"
            for line in lines:
                last_line = line
                new_phase = phases.advance(phase, line)
                if new_phase != phase:
                    say(f"phase {new_phase} (after {time.monotonic() - phase_start:.1f}s in {phase})")
                    faulthook.reached(f"phase:{new_phase}")
                    phase, phase_start = new_phase, time.monotonic()
                for event in classifier.feed(line):
                    if event.severity is Severity.FATAL:
                        return event.log_class.value, event.text.splitlines()[-1][:300]
                    if event.log_class is LogClass.READY:
                        return "READY", event.text[:300]
                    if event.severity is Severity.WARNING:
                        seen = warned[event.log_class.value] = warned.get(event.log_class.value, 0) + 1
                        if seen == 1:  # the first of each class; the count is in the release's event log
                            say(f"warning {event.log_class.value}: {event.text.splitlines()[0][:160]}")
            now = time.monotonic()
            budget = getattr(book.budgets, phase)
            if now - phase_start > budget:
                return "HANG", f"no progress for {budget:.0f}s in phase {phase}; last line: {last_line[:200]}"
            if now - last_state_check > 2:
                last_state_check = now
                state = unit_state(conn, host, unit)
                if state.get("ActiveState") in ("failed", "inactive"):
                    for event in classifier.flush():
                        if event.severity is Severity.FATAL:
                            return event.log_class.value, event.text.splitlines()[-1][:300]
                    return "EXITED", (f"the server exited ({state.get('Result', '?')}, status "
                                      f"{state.get('ExecMainStatus', '?')}); last line: {last_line[:200]}")
    finally:
        follower.close()


def _with_key(env_file: str, command: str) -> str:
    """Run `command` with $KEY set from the unit's env file on the host: the API key never travels over
    SSH nor shows in fleet's command lines."""
    ef = shlex.quote(env_file)
    return (f"KEY=$( [ -r {ef} ] && . {ef} >/dev/null 2>&1; printf %s \"${{{API_KEY_VAR}:-}}\" ); "
            f"{command}")


def health_check(conn: Connection, host: Host, book: Playbook) -> tuple[str, str]:
    """/health must answer 200 and the known-answer prompt must come back right."""
    base = f"http://127.0.0.1:{book.serve.port}"
    code = sh(conn, host, f"curl -s -o /dev/null -w '%{{http_code}}' -m 10 {base}/health || true").strip()
    if code != "200":
        return "HEALTH_FAILED", f"GET /health answered {code or 'nothing'}"
    body = json.dumps({"text": book.health.prompt,
                       "sampling_params": {"max_new_tokens": book.health.max_tokens, "temperature": 0}})
    auth = '-H "Authorization: Bearer $KEY" ' if book.serve.api_key else ""
    env_file = f"/etc/fleet/{book.serve.unit or host.unit}.env"
    out = sh(conn, host, _with_key(env_file, f"curl -s -m 120 {auth}-H 'Content-Type: application/json' "
                                             f"-d {shlex.quote(body)} {base}/generate || true"))
    try:
        text = json.loads(out)["text"]
    except (ValueError, KeyError, TypeError):
        return "HEALTH_FAILED", f"POST /generate gave no text: {out[:200]!r}"
    if not text.strip().startswith(book.health.expect):
        return "WRONG_ANSWER", f"{book.health.prompt!r} -> {text[:80]!r}, expected {book.health.expect!r}"
    return "READY", f"healthy; {book.health.prompt!r} -> {text.strip()[:40]!r}"


def restore(conn: Connection, host: Host, store: ReleaseStore, release: Release, book: Playbook,
            say: Progress) -> Attempt:
    """Put a release's unit, env and patch sets back byte for byte, restart, and wait for READY + health."""
    start = time.monotonic()
    unit = Path(next(p for p in release.files if p.endswith(".service") and not p.startswith("before:"))).stem
    failed = put_back(conn, host, store, release, book, say)
    if failed:
        return failed
    cursor = journal_cursor(conn, host)
    sh(conn, host, f"systemctl reset-failed {shlex.quote(unit)} 2>/dev/null; systemctl restart {shlex.quote(unit)}")
    outcome, evidence = watch(conn, host, unit, cursor, book, say)
    if outcome == "READY":
        outcome, evidence = health_check(conn, host, book)
    return Attempt(release.rung or "-", outcome, evidence, time.monotonic() - start)


def put_back(conn: Connection, host: Host, store: ReleaseStore, release: Release, book: Playbook,
             say: Progress) -> Attempt | None:
    """A release's patch sets, unit and env back byte for byte with the unit stopped (not started again);
    the failed Attempt when that cannot be done."""
    start = time.monotonic()
    unit = Path(next(p for p in release.files if p.endswith(".service") and not p.startswith("before:"))).stem
    # Patch sets first: a refusal (a hand-edited file) must leave the running server alone.
    problem = set_patches(conn, host, release.config.get("patches", []), say)
    if problem:
        return Attempt(release.rung or "-", "PREFLIGHT", problem, time.monotonic() - start)
    expected = (release.patches or {}).get("files") or {}
    now = patched_files(conn, host) if expected else {}
    for path, sha in expected.items():
        if now.get(path) != sha:
            return Attempt(release.rung or "-", "PREFLIGHT", f"{path} is not as release {release.id} left it "
                           f"(sha256 {str(now.get(path))[:12]} != {sha[:12]}) after re-applying its patch sets",
                           time.monotonic() - start)
    copies = {}
    for path, meta in release.files.items():
        if path.startswith("before:"):
            continue
        data = store.file(release, path)
        if data is None or sha256(data) != meta["sha256"]:
            return Attempt(release.rung or "-", "PREFLIGHT", f"release {release.id} copy of {path} is missing or "
                           "damaged (sha256 mismatch)", time.monotonic() - start)
        copies[path] = data
    stop_and_empty_gpus(conn, host, unit, book.budgets.stop, say)
    for path, meta in release.files.items():
        if path not in copies or sha256(read_file(conn, path) or b"") == meta["sha256"]:
            continue  # already as the release has it: a write that is not needed cannot fail on a full disk
        write_atomic(conn, path, copies[path], int(meta.get("mode", "0o600"), 8))
        if sha256(read_file(conn, path) or b"") != meta["sha256"]:
            return Attempt(release.rung or "-", "PREFLIGHT", f"{path} did not verify after writing",
                           time.monotonic() - start)
    daemon_reload(conn, host)
    return None


# ---------------------------------------------------------------------- preflight probes (one command each)


MIN_FREE_KIB = 2 * 2**20  # logs, JIT builds and caches need room; a full disk fails a start halfway


def host_problems(facts: HostFacts) -> list[str]:
    """What makes any start fail on this host, from the probe alone: a torch without the GPUs' arch, or
    too little disk where the venv and the flashinfer cache live."""
    problems = [w for w in known_bad(facts) if w.startswith("torch was not built for SM")]
    for key in ("root", "venv", "flashinfer_cache"):
        disk = facts.disk.get(key)
        if disk and disk.avail_kib is not None and disk.avail_kib < MIN_FREE_KIB:
            problems.append(f"only {disk.avail_kib // 1024} MiB free on {disk.mount or disk.path} ({key}); "
                            f"need {MIN_FREE_KIB // 2**20} GiB")
    return problems


def known_flags(conn: Connection, host: Host, venv: str) -> set[str] | None:
    res = sh(conn, host, f"{shlex.quote(venv)}/bin/python -m sglang.launch_server --help 2>/dev/null || true")
    import re

    flags = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", res))
    return flags or None


def model_problem(conn: Connection, host: Host, path: str) -> str | None:
    """The model folder must have config.json and every shard its index names."""
    script = (
        "import json,os,sys\n"
        "p=sys.argv[1]\n"
        "if not os.path.isfile(os.path.join(p,'config.json')): print('no config.json in '+p); sys.exit()\n"
        "i=os.path.join(p,'model.safetensors.index.json')\n"
        "if os.path.isfile(i):\n"
        " m=sorted(set(json.load(open(i)).get('weight_map',{}).values()))\n"
        " miss=[f for f in m if not os.path.isfile(os.path.join(p,f))]\n"
        " if miss: print('%d of %d shards missing in %s, e.g. %s'%(len(miss),len(m),p,miss[0]))\n"
    )
    out = sh(conn, host, f"python3 -c {shlex.quote(script)} {shlex.quote(path)}").strip()
    return f"model {out}" if out else None


def port_problem(conn: Connection, host: Host, port: int, unit: str) -> str | None:
    """The port must be free or held by our own unit's processes."""
    script = (f"out=$(ss -Hltnp 'sport = :{int(port)}' 2>/dev/null); [ -z \"$out\" ] && exit 0; "
              f"for p in $(echo \"$out\" | grep -o 'pid=[0-9]*' | cut -d= -f2); do "
              f"grep -q {shlex.quote('/' + unit + '.service')} /proc/$p/cgroup 2>/dev/null && exit 0; done; "
              f"echo \"$out\" | head -n 1")
    out = sh(conn, host, script).strip()
    return f"port {port} is in use by another process: {out[:160]}" if out else None


def patch_problem(conn: Connection, host: Host, name: str) -> str | None:
    res = patches.check_host(conn, host, patchsets.load_sets([name]))
    return None if res.ok else (res.error or f"patch set {name} cannot apply")


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _redact(env_text: str) -> str:
    return "\n".join(f"{line.split('=', 1)[0]}=<secret>" if line.startswith(API_KEY_VAR + "=") else line
                     for line in env_text.splitlines()) + ("\n" if env_text.endswith("\n") else "")


# ---------------------------------------------------------------------- rollback and history


def rollback(host: Host, book: Playbook, opts: ConnectOptions, to: str | None,
             progress: Progress = lambda m: None) -> DeployResult:
    """Restore a release (default: the one before the current) byte for byte and make it current again."""
    conn = open_connection(host, opts)
    try:
        with hostlock.held(conn, host, "rollback") as lock:
            recovered = recover_after_crash(conn, host, book, book.serve.unit or host.unit, lock, progress)
            store = ReleaseStore(conn, host)
            good = [r for r in store.list() if r.status == "ok"]
            current = store.current_id()
            if to:
                target = store.load(to)
                if target is None:
                    raise FleetError(f"{host.name}: no release {to} (see `inv history --host {host.name}`)")
                if target.status != "ok":
                    raise FleetError(f"{host.name}: release {to} never served ({target.status}); refusing")
            else:
                earlier = [r for r in good if r.id != current and (current is None or r.id < current)]
                if not earlier:
                    raise FleetError(f"{host.name}: no earlier known-good release to roll back to")
                target = earlier[-1]
            progress(f"rolling back to {target.id} ({target.rung})")
            attempt = restore(conn, host, store, target, book, progress)
            result = DeployResult(host.name, "failed", release=target.id, config=target.config, attempts=[attempt],
                                  recovered=recovered)
            if attempt.outcome == "READY":
                store.mark_current(target)
                result.status = "ok"
            else:
                result.error = f"{host.name}: rollback to {target.id} did not come up: {attempt.outcome}"
            return result
    finally:
        conn.close()


def history(host: Host, opts: ConnectOptions) -> tuple[list[Release], str | None]:
    conn = open_connection(host, opts)
    try:
        store = ReleaseStore(conn, host)
        return store.list(), store.current_id()
    finally:
        conn.close()
