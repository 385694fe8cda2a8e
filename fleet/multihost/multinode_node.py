"""One node of a multi-node deployment (fleet.multihost.multinode) and its run: its session, release store and
release, what it runs now, and its result, each changed by the step of the deployment that changes it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fabric import Connection

from fleet.deploy.hostrun import HostRun
from fleet.deploy.ladder import Deployer
from fleet.deploy.release_run import ReleaseRun
from fleet.deploy.results import Attempt, DeployResult, FellBack, Planned
from fleet.errors import FleetError
from fleet.host.facts import HostFacts, stack_versions
from fleet.host.releases import Release, ReleaseStore, recorded_sglang
from fleet.host.session import HostSession
from fleet.host.venvs import VenvRecord
from fleet.inventory import Host
from fleet.outcomes import DeployStatus
from fleet.playbook import sglang_version
from fleet.progress import Progress
from fleet.yamlfile import JsonObject


@dataclass
class Node:
    rank: int
    host: Host
    deployer: Deployer
    say: Progress
    result: DeployResult
    # Set as the deployment goes (connected, probed, planned, opened): read before it is set is a bug, and
    # raises AttributeError rather than passing None along.
    session: HostSession = field(init=False)
    conn: Connection = field(init=False)
    host_run: HostRun = field(init=False)
    store: ReleaseStore = field(init=False)
    facts: HostFacts = field(init=False)
    planned: Planned = field(init=False)
    release: Release = field(init=False)
    run: ReleaseRun = field(init=False)
    previous: Release | None = None  # what the node ran before (None: nothing yet)
    @property
    def prior(self) -> Release:
        """`previous` where the step at hand has made sure there is one."""
        if self.previous is None:
            raise FleetError(f"{self.host.name}: node {self.rank} has no earlier release")
        return self.previous

    @property
    def sglang(self) -> str | None:
        """The sglang the node runs, for its journal's sites and remedies: as a deploy probed it, or (a rollback
        or restore, which probes nothing) as the release being started recorded it."""
        facts: HostFacts | None = getattr(self, "facts", None)  # unset until a deploy's probe
        if facts is not None:
            return sglang_version(facts)
        return recorded_sglang(self.previous.facts) if self.previous else None

    unit: str = ""  # the unit started in the current step (the new one, or the previous release's)
    serves_api: bool = False  # rank 0 of what runs now: health goes through its /generate

    # ---------------------------------------------------------------- its run, as the deployment goes
    def connected(self, session: HostSession) -> None:
        self.session, self.conn = session, session.conn

    def runs_under(self, run: HostRun) -> None:
        """Its run under the host's lock, what recovery closed first in its result."""
        self.host_run = run
        self.result = replace(self.result, recovered=run.recovered)

    def reads(self, store: ReleaseStore) -> None:
        self.store = store

    def probed(self, facts: HostFacts) -> None:
        self.facts = facts

    def goes_back_to(self, release: Release | None) -> None:
        """The release a put-back or rollback starts on it (`previous`: what it ran before, where a deploy set it)."""
        self.previous = release

    def opened(self, release: Release, run: ReleaseRun) -> None:
        """Its release of the deployment, in progress."""
        self.release, self.run = release, run
        self.result = replace(self.result, release=release.id)

    def plans(self, planned: Planned) -> None:
        self.planned = planned

    def starts(self, unit: str, serves_api: bool) -> None:
        """The unit the next start runs, and whether it is the API node."""
        self.unit, self.serves_api = unit, serves_api

    # ---------------------------------------------------------------- its result, each change once
    def said(self, error: str) -> None:
        """The deployment's one line for this node (refused, failed, or what a rollback left)."""
        self.result = replace(self.result, error=error)

    def tried(self, *attempts: Attempt) -> None:
        self.result = replace(self.result, attempts=[*self.result.attempts, *attempts])

    def serves(self, status: DeployStatus, release: str | None, config: JsonObject) -> None:
        self.result = replace(self.result, status=status, release=release, config=config)

    def in_venv(self, venv: VenvRecord, facts: HostFacts) -> None:
        """`packages:`: the pins' venv it runs in, and the stack as probed there."""
        self.facts = facts
        self.result = replace(self.result, venv=venv, versions=stack_versions(facts), sglang=sglang_version(facts))

    def was_on(self, versions: dict[str, str]) -> None:
        self.result = replace(self.result, versions_before=versions)

    def ended_on(self, fell: FellBack) -> None:
        self.result = self.result.ended_on(fell)

    def end_failed(self, problem: str) -> None:
        """Its run's end failed (its lock kept, a node lost mid-deploy): it fails, whatever it did."""
        self.result = replace(self.result, status=DeployStatus.FAILED,
                              error=f"{self.result.error or self.host.name}; {problem}")
