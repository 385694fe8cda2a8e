"""`inv deploy` on one host: take it to a healthy sglang on the best rung of the ladder that works there.

lock -> recover what a dead run left -> probe -> preflight (nothing touched yet) -> open a release -> per
rung: stop and empty the GPUs, set patch sets, install unit and env atomically, restart, follow the journal
under per-phase budgets (fleet.logs.journal), check health and a known answer, the bench gate -> release
current, or fall back to the previous release (fleet.deploy.restore). docs/architecture.md draws the flow.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

from fabric import Connection
from paramiko import SSHException

from fleet import parallel
from fleet.deploy import bench as benching
from fleet.deploy import boot, fallback, fingerprint, hardware, preflight, recovery, restore
from fleet.deploy.attempt import AttemptRunner, BeforeStop
from fleet.deploy.hostrun import HostRun, deploy_recovery, host_run
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt, DeployResult, FellBack, bench_point
from fleet.deploy.serving import Serving, prune_venvs, with_pins
from fleet.errors import FleetError
from fleet.host import lock as hostlock
from fleet.host import probe_run, venvs
from fleet.host.facts import HostFacts, stack_versions
from fleet.host.releases import Release, ReleaseStore, new_id, node_of, now, versions_of
from fleet.host.service import ServiceError, drop_ins, read_file, shown, unit_state
from fleet.host.session import ConnectionLost, HostSession
from fleet.inventory import Host
from fleet.logs.redact import env_text as redact_env
from fleet.logs.rules import LogClass
from fleet.outcomes import DeployStatus, Outcome, ReleaseStatus
from fleet.patches import engine as patches
from fleet.patches import plan as patchplan
from fleet.patches import sets as patchsets
from fleet.playbook import (
    Playbook,
    Rung,
    secret_names,
    sglang_version,
)
from fleet.progress import Progress, quiet
from fleet.ssh.connect import ConnectOptions
from fleet.yamlfile import JsonObject


def facts_summary(facts: HostFacts) -> JsonObject:
    """What a release records of the host it was made on."""
    return {"gpus": len(facts.gpus), "sm": sorted({g.sm for g in facts.gpus if g.sm}),
            "arch_family": facts.arch_family, "interconnect": facts.interconnect, "p2p": facts.p2p,
            "driver": facts.driver_version, "versions": stack_versions(facts)}


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


@dataclass(frozen=True)
class Plan:
    """What a deploy would do on one host: the rungs in the order it tries them, those refused before anything
    changes (preflight, known to fail here), and the current release when it already serves all of it."""

    rungs: list[Rung]
    refused: list[Attempt]
    serves: Release | None = None
    said: tuple[str, ...] = ()  # what planning has to say (a rung not for this host, the order of attempts), once
    why: str = ""  # why the current release is not what it would serve (the dry run says it: a diff may show none)


def patches_in_place(conn: Connection, host: Host, wanted: list[str]) -> bool:
    """The rung's patch sets are applied (or not needed here) and no other known set is (as set_patches leaves
    them)."""
    res = patches.check_host(conn, host, patchsets.load_sets(patchsets.available()))
    return all((sp.state != patchplan.APPLICABLE) if sp.name in wanted else (sp.state != patchplan.APPLIED)
               for sp in res.sets)


class StoppedBeforeChange(Exception):
    """Ctrl-C came after the release was opened and before the first rung touched the server."""


class StoppedAfterFailure(Exception):
    """Ctrl-C came while a rung was tried, and it failed: no later rung starts, the release before comes back."""


class Deployer:
    """The ladder's policy on one host: which rungs to try, in what order, after what; then current, or the
    fall-back. What a rung renders to is `serve` (fleet.deploy.serving); trying one is `runner`
    (fleet.deploy.attempt); the lock, recovery and put-back are the run skeleton's (fleet.deploy.hostrun)."""

    def __init__(self, host: Host, book: Playbook, book_path: Path, opts: ConnectOptions,
                 progress: Progress = quiet, secrets: dict[str, str] | None = None,
                 extra_args: tuple[str, ...] = (), before_stop: BeforeStop | None = None,
                 sessions: Callable[[Host, ConnectOptions], HostSession] = HostSession.open):
        """`sessions`: how the session to the host is opened (HostSession.open)."""
        self.book, self.opts, self.progress, self.sessions = book, opts, progress, sessions
        self.serve = Serving.of(host, book, book_path, secrets, extra_args)
        self.runner = AttemptRunner(self.serve, progress, before_stop=before_stop)
        self.facts: HostFacts | None = None  # as probed by this run (a host that served teaches its fingerprint)

    @property
    def host(self) -> Host:
        return self.serve.host

    def eligible(self, facts: HostFacts, say: Progress | None = None) -> list[Rung]:
        """The ladder's rungs whose `when:` this host meets, in order (the facts kept: what a run teaches)."""
        self.facts = facts
        return self.serve.eligible(facts, say or self.progress)

    def preflight(self, conn: Connection, facts: HostFacts, rungs: list[Rung],
                  say: Progress | None = None) -> tuple[list[Rung], list[Attempt]]:
        s = self.serve
        return preflight.check(conn, s.host, self.book, s.venv, s.unit, facts, rungs, say or self.progress)

    def plan(self, conn: Connection, facts: HostFacts, previous: Release | None) -> Plan:
        """What this deploy does on the host, the one plan its dry run shows: the rungs that fit, pass
        preflight and are not known to fail here, in the order they are tried; and `previous` where it
        already serves exactly what would be installed (None: compare nothing, as --force)."""
        checked: list[str] = []  # a deploy that plans twice (before and after building the pins' venv) says the
        rungs, refused = self.preflight(conn, facts, self.eligible(facts, checked.append), checked.append)
        checked += self.serve.env_overrides(rungs)
        said: list[str] = []  # lines of the plan it goes by, once (say_plan): not 'trying it first' twice
        rungs, remembered = fingerprint.arrange(self.book, facts, rungs, said.append)
        refused += [Attempt(name, Outcome.PREFLIGHT, why, 0) for name, why in remembered]
        why = self.differs(conn, facts, rungs, previous) if previous is not None else ""
        serves = previous if previous is not None and not why else None
        skips = {f"rung {name}: {why}" for name, why in remembered}
        # the order of attempts ("trying it again") only where this deploy makes attempts
        ordered = [line for line in said if serves is None or line in skips]
        return Plan(rungs, refused, serves, tuple(checked + ordered), why)

    def say_plan(self, plan: Plan) -> Plan:
        for line in plan.said:
            self.progress(line)
        return plan

    def differs(self, conn: Connection, facts: HostFacts, rungs: list[Rung], previous: Release) -> str:
        """Why `previous` does not serve what the deploy would install ("": it does): its rung must be the one the
        deploy means to serve (the fingerprint's winner, else the one serving, still fit and not known to fail),
        and the unit, env, patch sets, venv and key it would install for that rung what is there, healthy. The dry
        run says it: a new API key or a stopped server showed `(no differences)`, and the deploy restarted."""
        s = self.serve
        if previous.playbook != self.book.name:  # it said `plain is not fit here or known to fail`
            return f"it serves playbook {previous.playbook}, and the deploy serves {self.book.name}"
        target = fingerprint.winner(self.book, facts, rungs) or previous.rung
        rung = next((r for r in rungs if r.name == target), None)
        if rung is None or rung.name != previous.rung:
            return f"it serves rung {previous.rung}, and the deploy serves " + (
                f"rung {rung.name}" if rung else f"another ({previous.rung} is not fit here or known to fail)")
        if self.book.packages and not venvs.exists(conn, s.host, s.venv):  # the server would not start again
            if venvs.recorded(previous.facts) == s.venv:
                return f"the venv it runs from ({s.venv}) is gone: the deploy builds it"
            return f"it runs from another venv than the playbook's pins build ({s.venv}, not on the host yet)"
        planned = s.plan(rung, previous.id, sglang_version(facts))
        if read_file(conn, s.host, s.unit_path) != planned.unit_text.encode():
            return f"its unit file {s.unit_path} is not the one the deploy writes (the diff below)"
        if read_file(conn, s.host, s.env_path) != planned.env_text.encode():
            return f"its env file {s.env_path} is not the one the deploy writes (the diff below)"
        try:
            foreign = drop_ins(conn, s.host, s.unit_path)
        except ServiceError as e:  # never read as "none": what it cannot see may override the unit
            return f"fleet cannot read the drop-ins systemd would apply over its unit: {e}"
        if foreign:
            return f"drop-ins fleet did not write override its unit: {shown(foreign)}"
        if not patches_in_place(conn, s.host, rung.patches):
            return "its patch sets are not as the rung wants them (below)"
        if not s.key_unchanged(conn):
            return (f"the API key the playbook names (serve.api_key) is not the one in {s.key_path}: the deploy "
                    "installs it")
        if not s.healthy(conn):
            state = unit_state(conn, s.host, s.unit)
            active, sub = state.get("ActiveState", "?"), state.get("SubState", "?")
            if active != "active":
                return f"its server is not running (unit {active} ({sub}))"
            return "its server is not healthy (/health or the known answer fails)"
        return ""

    # ------------------------------------------------------------------ the run
    def run(self, dry_run: bool = False, force: bool = False) -> DeployResult:
        session = self.sessions(self.host, self.opts)
        if dry_run:  # reads only: no lock, no release
            try:
                return self._dry_run(session, force)
            except (EOFError, OSError, SSHException) as exc:  # an SFTP or channel call on a link that died
                session.lost("mid-deploy", exc)
                raise
            finally:
                session.close()
        unit = self.serve.unit
        try:
            with host_run(self.host, self.opts, f"deploy {self.book.name}", unit=unit, progress=self.progress,
                          recover=deploy_recovery(self.book, unit, self.progress), session=session) as run:
                return replace(self._deploy(run, force), recovered=run.recovered)
        finally:
            session.close()

    def _deploy(self, host_run: HostRun, force: bool) -> DeployResult:
        conn = host_run.session.conn
        self.progress("probing")
        facts = probe_run.probe_on(conn, self.host, self.progress)
        store = ReleaseStore(conn, self.host)
        previous = store.current()
        # what the upgrade is measured against: the gate's record of what serves now
        before = bench_point(benching.result_of(previous.to_json()), previous.id, previous.rung) if previous else None
        result = DeployResult(host=self.host.name, sglang=sglang_version(facts), versions=stack_versions(facts),
                              versions_before=versions_of(previous.facts) if previous else {}, bench_before=before)
        where = node_of(previous) if self.book.nodes is None else None
        if where and not force:
            return replace(result, error=(
                f"{self.host.name} is {where}: {self.book.name} would serve it alone and leave the other nodes "
                "without it; deploy or roll back that deployment with every node's --host, or give --force to "
                "replace it here; nothing was changed"))
        plan = None
        if previous is not None and not force:
            plan_facts = facts
            if self.book.packages:
                with suppress(venvs.VenvError):  # else the build below says why, before anything is stopped
                    plan_facts, _ = self.pins_view(conn, facts)
            plan = self.plan(conn, plan_facts, previous)  # said below, once: here if unchanged, else the pins' plan
        if plan is not None and plan.serves is not None:
            self.say_plan(plan)
            self.progress(f"release {plan.serves.id} already serves what this deploy would install (rung "
                          f"{plan.serves.rung}) and is healthy: nothing to do")
            return replace(result, status=DeployStatus.UNCHANGED, release=plan.serves.id, config=plan.serves.config)
        if (hw := hardware.assess(facts)).fault:  # nothing changed: no rung can serve on a faulty GPU
            return replace(result, attempts=[*result.attempts, Attempt("-", LogClass.GPU_FAULT, hw.evidence, 0)],
                           error=(f"{self.host.name}: GPU fault, nothing was changed: {hw.evidence} "
                                  f"(inv recover --host {self.host.name})"))
        if parallel.stopping():
            return self.stopped(result)
        if self.book.packages:
            result, pinned = self.pinned_venv(conn, result)
            if pinned is None:
                return result
            facts = pinned
            plan = self.plan(conn, facts, None)  # in the venv the pins built: the plan it goes by, said once
        elif plan is None:
            plan = self.plan(conn, facts, None)
        self.say_plan(plan)
        release = Release(id=new_id(), host=self.host.name, playbook=self.book.name,
                          playbook_sha256=self.serve.book_sha, created=now(), facts=facts_summary(facts))
        if self.book.packages:
            release.runs_in(self.serve.venv)
        rungs = plan.rungs
        result = replace(result, attempts=[*result.attempts, *plan.refused])
        if not rungs:
            return replace(result, error=f"{self.host.name}: no rung of {self.book.name} can run here; nothing "
                                         "was changed")
        if parallel.stopping():
            return self.stopped(result)
        run = host_run.open_release(store, release, rungs=[r.name for r in rungs])
        result = replace(result, release=release.id)
        tried: list[Attempt] = []  # each attempt as it ends (an exception may end the climb)
        try:
            served = self._climb(conn, run, rungs, facts, tried)
            if served is not None:
                return replace(result, status=DeployStatus.OK, config=served, attempts=[*result.attempts, *tried])
        except StoppedBeforeChange:  # the release was opened, the server never touched: closed, nothing else
            run.fail(ReleaseStatus.INTERRUPTED)
            return self.stopped(replace(result, release=previous.id if previous else None))
        except StoppedAfterFailure as stop:  # it went on to the next rung, a configuration that never served
            result = replace(result, attempts=[*result.attempts, *tried])
            return result.ended_on(self.fall_back(conn, store, release, previous, str(stop), ReleaseStatus.INTERRUPTED))
        except ConnectionLost:
            raise  # nothing more can be done from here: the next run's recovery finds the release in progress
        except Exception as exc:  # any step after the stop: the previous release goes back, as when nothing served
            if not self.runner.touched:
                with suppress(Exception):  # the error to report is the first; an unclosed release is recovered
                    run.fail()
                raise
            why = f"{type(exc).__name__ if not isinstance(exc, FleetError) else 'error'}: {_first_line(exc)}"
            self.progress(f"{why}; falling back")
            result = replace(result, attempts=[*result.attempts, *tried])
            return result.ended_on(self.fall_back(conn, store, release, previous, why))
        result = replace(result, attempts=[*result.attempts, *tried])
        if not self.runner.touched:  # every rung failed before anything was stopped or written: leave the host be
            run.fail()
            return replace(result, status=DeployStatus.FAILED,
                           release=previous.id if previous else release.id, config=previous.config if previous else {},
                           error=(f"{self.host.name}: every rung failed before anything on the host changed; it "
                                  "stays " + (f"on release {previous.id}" if previous else "as it was")))
        return result.ended_on(self.fall_back(conn, store, release, previous, "every rung failed"))

    def stopped(self, result: DeployResult) -> DeployResult:
        """Ctrl-C came before this deploy changed anything: it stops there, the host as it was."""
        self.progress("Ctrl-C: stopped before any change")
        return replace(result, status=DeployStatus.SKIPPED,
                       error=f"{self.host.name}: stopped by Ctrl-C before any change; it runs what it ran before")

    def fall_back(self, conn: Connection, store: ReleaseStore, release: Release, previous: Release | None,
                  why: str, ends_as: ReleaseStatus = ReleaseStatus.FAILED) -> FellBack:
        s = self.serve
        steps = restore.ServerSteps(conn, s.origin, store, release, self.book, s.unit, self.progress, ends_as)
        return fallback.fall_back(steps, previous, why, self.progress)

    def pinned_venv(self, conn: Connection, result: DeployResult) -> tuple[DeployResult, HostFacts | None]:
        """`packages:`: the venv of the pins, built now when the host has none (before anything is stopped: a
        failure leaves the old server serving), then the host probed in it; None with the result's error set."""
        try:
            venv = self.use_pins(conn)
        except venvs.VenvError as exc:
            return replace(result, error=f"{exc}; nothing was stopped"), None
        facts = probe_run.probe_on(conn, self.host, self.progress)
        return replace(result, venv=venv.record(), versions=stack_versions(facts),
                       sglang=sglang_version(facts)), facts

    def use_pins(self, conn: Connection) -> venvs.Venv:
        """The venv of the playbook's pins, built when the host has none (nothing stopped; VenvError with one
        line otherwise), made the one this run serves, probes, patches and benchmarks in."""
        self.serve, venv = with_pins(conn, self.serve, self.progress)
        self.runner.serve_from(self.serve, self.serve.gate())
        return venv

    def _climb(self, conn: Connection, run: ReleaseRun, rungs: list[Rung], facts: HostFacts,
               tried: list[Attempt]) -> JsonObject | None:
        """Try the rungs in order, each attempt added to `tried` as it ends; the config that serves once a rung
        serves and its release is current, else None."""
        last: str | None = None
        for rung in rungs:
            if parallel.stopping() and not self.runner.touched:  # Ctrl-C while the release opened: still no change
                raise StoppedBeforeChange
            if parallel.stopping():  # Ctrl-C while a rung was tried, which failed: as the Ctrl-C said
                raise StoppedAfterFailure(f"Ctrl-C: no rung is tried after {tried[-1].rung if tried else 'one'} "
                                          f"failed ({last})")
            if not rung.worth_trying_after(last):
                self.progress(f"rung {rung.name}: not worth trying after {last}")
                continue
            self.runner.key_by(self.facts or facts)
            attempt, planned = self.runner.attempt(conn, run, rung, sglang_version(self.facts))
            attempt, _ = self.runner.judge_hardware(conn, run, attempt, facts)
            tried.append(attempt)
            run.record(attempt)
            if attempt.outcome == Outcome.READY:
                note = run.succeed(rung.name, planned.config, self.book.keep_releases)
                if note:
                    self.progress(note)
                if self.book.packages:
                    prune_venvs(conn, self.host, self.progress)
                return planned.config
            last = attempt.outcome
            if last == LogClass.GPU_FAULT:
                break
        return None

    # ------------------------------------------------------------------ dry run
    def pins_view(self, conn: Connection, facts: HostFacts) -> tuple[HostFacts, str]:
        """`packages:` without building anything: the run serves from the pins' venv, probed there when the
        host has it (else the host as it is, the unit naming the venv to build); and a line saying which.
        VenvError when the pins name no venv."""
        venv, there = venvs.planned(conn, self.serve.origin, self.book.packages, self.serve.lock)
        if there:
            self.serve = self.serve.in_venv(venv)
            return probe_run.probe_on(conn, self.host, self.progress), f"venv {venv}: there, used as it is\n"
        self.serve = replace(self.serve, venv=venv)
        return facts, f"venv {venv}: would be built\n"

    def left_behind(self, conn: Connection) -> str:
        """What an earlier run left in progress here, which the deploy settles before its plan (under the lock,
        fleet.deploy.recovery): said first by the dry run, whose diff is of the files as they are now."""
        store = ReleaseStore(conn, self.serve.origin)
        left = recovery.find(store)
        owner = hostlock.read_owner(conn, self.host)
        dead = hostlock.dead_owner(owner)
        if not left:  # a lock alone (a run given up on before its release opened: --host-timeout, kill -9)
            return f"the host's lock was left by a run that died ({dead}): the deploy takes it over first\n" \
                if dead else ""
        live = owner is not None and not dead
        current = store.current()
        # a node of a multi-node server is put back but not started alone (fleet.deploy.recovery): it said
        # "restarted and verified", and the deploy left it stopped for its peers
        putting = (f", putting back the files of node release {current.id} (unit left stopped: it starts with its "
                "peers)" if current is not None and node_of(current) else
                ", putting back the last known-good release (restarted and verified)" if current is not None else
                # fleet.deploy.recovery's words: it said "putting back ... restarted" where there was none
                ", with no earlier release to put back: the unit stopped and fleet's patches reverted")
        lines = []
        for it in left:
            back = putting if it.touched_host else ""
            held = hostlock.describe(owner, host=self.host.name)
            then = (f"its run may still hold the host's lock ({held}): the deploy refuses while it does" if live
                    else f"the deploy first takes over what its run left{back}")
            lines.append(f"{it.describe()}: {then}; the diff below is of the files as they are now\n")
        return "".join(lines)

    def _dry_run(self, session: HostSession, force: bool) -> DeployResult:
        """The deploy's plan (Deployer.plan), shown: nothing to do, or the first rung it tries and how the unit,
        env and patch sets would change for it."""
        conn = session.conn
        facts = session.probe(self.progress)
        venv_note = ""
        if self.book.packages:  # the unit would name the pins' venv; nothing is sent or built
            try:
                facts, venv_note = self.pins_view(conn, facts)
            except venvs.VenvError as exc:
                return DeployResult(self.host.name, DeployStatus.FAILED, error=str(exc))
        venv_note = self.left_behind(conn) + venv_note
        serving = ReleaseStore(conn, self.serve.origin).current()
        previous = None if force else serving
        venv_note += boot_note(session, serving)
        plan = self.say_plan(self.plan(conn, facts, previous))
        if plan.serves is not None:
            return DeployResult(self.host.name, DeployStatus.DRY_RUN, release=plan.serves.id,
                                config=plan.serves.config, attempts=plan.refused, unchanged=True,
                                diff=venv_note + f"release {plan.serves.id} already serves what the deploy would "
                                     f"install (rung {plan.serves.rung}) and is healthy: nothing to do\n")
        if not plan.rungs:
            return DeployResult(self.host.name, DeployStatus.FAILED, attempts=plan.refused, error=(
                f"{self.host.name}: no rung of {self.book.name} can run here; nothing was changed"))
        rung = plan.rungs[0]
        planned = self.serve.plan(rung, "dry-run", sglang_version(facts))
        diffs: list[str] = []
        if serving is not None and plan.why:
            running = unit_state(conn, self.host, self.serve.unit).get("ActiveState") in ("active", "activating")
            diffs.append(f"release {serving.id} (rung {serving.rung}) is not what this deploy would serve: {plan.why}; "
                         f"the deploy {'stops its server and ' if running else ''}starts rung {rung.name}\n")
        elif serving is not None and force:
            running = unit_state(conn, self.host, self.serve.unit).get("ActiveState") in ("active", "activating")
            diffs.append(f"--force: release {serving.id} (rung {serving.rung}) is not compared; the deploy "
                         f"{'stops its server and ' if running else ''}starts rung {rung.name}\n")
        # the deploy's first step of it, once the venv it names is there (one to build: after the build)
        building = ": would be built\n" in venv_note
        if not building:  # a venv to build is probed only once built: what it holds is the playbook's pins
            diffs.append(versions_moved(serving, stack_versions(facts)))
        why = None if building else restore.unit_problem(conn, self.host, planned, self.serve.unit_path)
        if why:
            diffs.append(f"rung {rung.name}: the deploy would fail it {Outcome.INSTALL_FAILED} before stopping "
                         f"anything: {why}\n")
        names = secret_names(self.book)
        for path, new in ((self.serve.unit_path, planned.unit_text), (self.serve.env_path, planned.env_text)):
            old = read_file(conn, self.host, path)
            old_text, new = (redact_env(old, names) if old is not None else ""), redact_env(new, names)
            diffs += difflib.unified_diff(old_text.splitlines(True), new.splitlines(True),
                                          fromfile=f"{path} (installed)", tofile=f"{path} ({rung.name})")
        for name in rung.patches:
            res = patches.check_host(conn, self.host, patchsets.load_sets([name]))
            for sp in res.sets:
                diffs.append(f"patch set {sp.name}: {sp.state}" + (f" ({sp.reason})" if sp.reason else "") + "\n")
        return DeployResult(self.host.name, DeployStatus.DRY_RUN, config=planned.config, attempts=plan.refused,
                            unchanged=False, diff=venv_note + "".join(diffs))


def versions_moved(serving: Release | None, versions: dict[str, str]) -> str:
    """The dry run's line for the stack the deploy moves the host between, in the deploy's words (a downgrade it
    kept quiet about: only the unit's venv path differed); "" when nothing moves or nothing was recorded."""
    before = versions_of(serving.facts) if serving is not None else {}
    moved = [f"{k} {before.get(k) or '-'} -> {v}" for k, v in versions.items() if before and before.get(k) != v]
    return f"versions: {', '.join(moved)} (what serves now -> what the deploy would serve)\n" if moved else ""


def boot_note(s: HostSession, current: Release | None) -> str:
    """The dry run's line when the current release's unit is not enabled (a host an older fleet deployed): the
    deploy enables the unit of the release it leaves serving (fleet.deploy.boot); "" otherwise."""
    if current is None:
        return ""
    unit = restore.unit_of(current)
    state = s.unit_file_states([unit])[unit]
    if state == boot.ENABLED:
        return ""
    if state.startswith("masked"):
        return f"{unit} is {state}: a reboot would not start release {current.id}; the deploy leaves it masked\n"
    return (f"{unit} is {state or 'not enabled'}: a reboot would not start release {current.id}; the deploy enables "
            "the unit of the release it leaves serving, even when it changes nothing else\n")
