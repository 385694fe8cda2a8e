"""What deploy, rollback and multi-node hand back: typed results, JSON-shaped as `--json` prints them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fleet.deploy.bench_record import BenchRecord
from fleet.errors import ConnectError, FleetError, NotReached
from fleet.host.venvs import VenvRecord
from fleet.logs.remedies import remedy_for
from fleet.outcomes import DeployStatus, Outcome
from fleet.playbook import Rung, shown_env
from fleet.yamlfile import JsonObject


@dataclass(frozen=True)
class Attempt:
    """One rung tried on one host: how it ended (an Outcome or a log class), why, how long, and the gate's
    benchmark where it measured one."""

    rung: str
    outcome: str  # an Outcome or a log class (fleet.logs.rules.LogClass)
    evidence: str
    seconds: float
    bench: BenchRecord | None = None  # the performance gate's record (fleet.deploy.bench.run + verdict)
    lost_to: str | None = None  # a tune's trial that served slower than the rung the tune kept: none to act on

    def to_json(self) -> JsonObject:
        out: JsonObject = {"rung": self.rung, "outcome": self.outcome, "evidence": self.evidence,
                          "seconds": round(self.seconds, 1)}
        if self.lost_to is not None:
            out["lost_to"] = self.lost_to
        if self.bench is not None:
            out["bench"] = self.bench.to_json()
        return out


@dataclass(frozen=True)
class BenchPoint:
    """What an upgrade's summary compares of a gate's record: tok/s (the median of its runs where the tuner
    repeated it) and the median TTFT in ms, with the release and rung it measured."""

    release: str | None
    rung: str | None
    tok_s: float
    ttft_ms: float | None

    def to_json(self) -> JsonObject:
        return {"release": self.release, "rung": self.rung, "tok_s": self.tok_s, "ttft_ms": self.ttft_ms}


def bench_point(record: BenchRecord | None, release: str | None = None, rung: str | None = None) -> BenchPoint | None:
    """A bench gate's record reduced to a BenchPoint; None when there is none or it holds no tok/s (a record
    read from a manifest was checked where it was parsed: fleet.deploy.bench_record)."""
    if record is None or record.tok_s is None:
        return None
    return BenchPoint(release, rung, float(record.tok_s), record.result.stat("ttft", "median"))


@dataclass(frozen=True)
class DeployResult:
    """One host's deploy (or rollback, or multi-node deploy) as `--json` prints it: its status, the release it
    serves, each rung tried, the stack before and after, and the bench gate before and after."""

    host: str
    status: DeployStatus = DeployStatus.FAILED
    release: str | None = None
    config: JsonObject = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    error: str | None = None
    diff: str | None = None
    recovered: list[str] = field(default_factory=list)  # what a dead earlier run left, and how it was closed
    versions: dict[str, str] = field(default_factory=dict)  # what the venv held at the probe (facts.STACK)
    versions_before: dict[str, str] = field(default_factory=dict)  # what the release current before recorded
    notes: list[str] = field(default_factory=list)  # what the operator should know though it served
    sglang: str | None = None  # the version the host runs, as probed: remedies name its flags as it spells them
    venv: VenvRecord | None = None  # packages: the pinned venv
    bench_before: BenchPoint | None = None  # bench_point of the release current before (its recorded gate)
    unchanged: bool | None = None  # a dry run: the deploy would find the host serving its plan (nothing to do)
    unreached: NotReached | None = None  # failed because the host was not reached: why, in a word


    @classmethod
    def failed_by(cls, host: str, exc: FleetError) -> DeployResult:
        """A host's deploy that an error stopped before it had a result (a host not reached says why in a word)."""
        return cls(host, DeployStatus.FAILED, error=str(exc),
                   unreached=exc.cause if isinstance(exc, ConnectError) else None)

    @property
    def rung(self) -> str | None:
        """The rung its config names: what serves, when it served."""
        rung = self.config.get("rung")
        return rung if isinstance(rung, str) else None

    def ended_on(self, fell: FellBack) -> DeployResult:
        """The run ends where its fall-back left the host."""
        return replace(self, status=fell.status, release=fell.release, config=fell.config, error=fell.error)

    def to_json(self) -> JsonObject:
        config = self.config
        if isinstance(env := config.get("env"), dict):  # a release an older fleet recorded may hold values unmasked
            config = {**config, "env": shown_env({str(k): str(v) for k, v in env.items()})}
        out: JsonObject = {"host": self.host, "status": self.status, "release": self.release, "config": config,
                           "attempts": [self._attempt_json(a) for a in self.attempts], "error": self.error}
        if self.unreached is not None:
            out["unreached"] = self.unreached
        if self.diff is not None:
            out["diff"] = self.diff
        if self.unchanged is not None:
            out["unchanged"] = self.unchanged
        if self.recovered:
            out["recovered"] = self.recovered
        if self.versions and self.status in (DeployStatus.FAILED, DeployStatus.ROLLED_BACK):
            # nothing new serves: versions as found, once, as the terminal says them (a failed upgrade put back
            # read `versions` 0.5.23 `versions_before` 0.5.9, an upgrade's shape, while 0.5.9 served)
            if self.refused_at_preflight():
                out["nothing_changed"] = True
            out["versions"] = self.versions_before or self.versions
            if self.versions_before and self.versions != self.versions_before:
                out["versions_probed"] = self.versions
        elif self.versions:
            out["versions"], out["versions_before"] = self.versions, self.versions_before
        if self.notes:
            out["notes"] = self.notes
        if self.venv is not None:
            out["venv"] = self.venv.to_json()
        after = self.bench_after()
        if self.bench_before is not None or after is not None:
            out["bench"] = {"before": self.bench_before.to_json() if self.bench_before else None,
                            "after": after.to_json() if after else None}
        return out

    def refused_at_preflight(self) -> bool:
        """Every rung tried was refused at preflight: the host failed with nothing changed on it."""
        return (self.status == DeployStatus.FAILED and bool(self.attempts)
                and all(a.outcome == Outcome.PREFLIGHT for a in self.attempts))

    def bench_after(self) -> BenchPoint | None:
        """bench_point of this run's gate: the attempt that served, else the last one measured (a rung the gate
        refused as slower: what the upgrade would have given)."""
        measured = [a for a in self.attempts if a.bench]
        served = [a for a in measured if a.outcome == Outcome.READY]
        for a in reversed(served or measured):  # a release that did not serve is not where the host is now
            if point := bench_point(a.bench, self.release if served else None, a.rung):
                return point
        return None

    def upgrade(self) -> list[tuple[str, str | None, str]]:
        """(name, version before or None, version now) for each of the stack that changed since the release
        that was current (none when there was none, or it recorded nothing)."""
        if not self.versions_before:
            return []
        return [(k, self.versions_before.get(k), v) for k, v in self.versions.items()
                if self.versions_before.get(k) != v]

    def fell_back(self) -> str | None:
        """How a deploy that serves got there by falling back: a rung before the one that serves failed or was
        refused ('served on rung safe after fast (CUDA_OOM) failed'), whatever changed (the versions or the
        playbook: the rung a change targets is the first one the host tries); None for anything else."""
        served = [a for a in self.attempts if a.outcome == Outcome.READY]
        failed = [a for a in self.attempts if a.outcome != Outcome.READY]
        if self.status != DeployStatus.OK or not served or not failed:
            return None
        return (f"served on rung {served[-1].rung} after "
                f"{', '.join(f'{a.rung} ({a.outcome})' for a in failed)} failed")

    def _attempt_json(self, a: Attempt) -> JsonObject:
        """An attempt that failed carries its remedy, the next thing to try, as the summary shows it."""
        out = a.to_json()
        if a.outcome != Outcome.READY and (a.outcome != Outcome.PREFLIGHT or self.status == DeployStatus.FAILED):
            if remedy := remedy_for(a.outcome, a.evidence, sglang=self.sglang):
                out["remedy"] = remedy
        return out


@dataclass(frozen=True)
class FellBack:
    """Where a fall-back left the host: ROLLED_BACK onto `release` (the one that served before), or FAILED (no
    earlier release: the unit stopped; or putting it back failed too), and the one line that says so."""

    status: DeployStatus
    release: str
    config: JsonObject
    error: str
    evidence: str = ""  # what the put-back release's check said

    @property
    def served_again(self) -> bool:
        return self.status == DeployStatus.ROLLED_BACK

    def said_as(self, label: str) -> str:
        """The one line as `label`'s own progress says it (the CLI leads each such line with the host's name), not
        `sbx0 sbx0: tune interrupted; back on release ...`."""
        return self.error.removeprefix(f"{label}: ") or f"back on release {self.release}"


@dataclass
class Planned:
    """A rung rendered for one host: the server's argv and environment, the unit and env file texts."""

    rung: Rung
    argv: list[str]
    env: dict[str, str]
    config: JsonObject
    unit_text: str
    env_text: str
    key: str | None = field(default=None, repr=False)  # the API key, for the key file; never recorded
    key_path: str | None = None  # where the key file goes (LoadCredential= names it)
