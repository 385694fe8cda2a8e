"""What `inv tune` hands back: each host's result, the release it measured against, and the result as far as
a tune got (what a failure part way reports)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fleet.deploy.noise import Runs
from fleet.deploy.results import Attempt, FellBack
from fleet.host.venvs import VenvRecord
from fleet.outcomes import DeployStatus, Outcome
from fleet.yamlfile import JsonObject


@dataclass(frozen=True)
class TuneBaseline:
    """The release that served before a tune, measured as each rung is: the bar a winner must clear."""

    release: str
    rung: str | None
    runs: Runs

    def to_json(self) -> dict[str, object]:
        return {"release": self.release, "rung": self.rung, "runs": self.runs.to_json()}


@dataclass(frozen=True)
class TuneResult:
    """One host's `inv tune` as `--json` prints it: the rungs measured, the winner against the release that
    served before, and where the host was left."""

    host: str
    status: DeployStatus  # ok | rolled_back | failed
    release: str | None = None
    winner: str | None = None
    winner_tok_s: float | None = None  # the median of its runs
    winner_spread: float | None = None
    decisions: tuple[str, ...] = ()  # each later rung against the one chosen so far (fleet.deploy.noise)
    attempts: list[Attempt] = field(default_factory=list)  # one per rung tried (the final restart is apart)
    final: Attempt | None = None  # the winner started again, when it was not the last rung tried
    fingerprint: str | None = None
    error: str | None = None
    baseline: TuneBaseline | None = None  # the release serving before, measured the same way
    venv: VenvRecord | None = None  # packages: the venv every rung ran in

    def ended_on(self, fell: FellBack) -> TuneResult:
        """The tune ends where its fall-back left the host."""
        return replace(self, status=fell.status, release=fell.release, error=fell.error)

    def to_json(self) -> JsonObject:
        return {"host": self.host, "status": self.status, "release": self.release, "winner": self.winner,
                "baseline": self.baseline.to_json() if self.baseline else None,
                "winner_tok_s": self.winner_tok_s, "winner_spread": self.winner_spread,
                "decisions": list(self.decisions), "fingerprint": self.fingerprint,
                "attempts": [a.to_json() for a in self.attempts],
                "final": self.final.to_json() if self.final else None, "error": self.error,
                **({"nothing_changed": True} if self.refused_at_preflight() else {}),
                **({"venv": self.venv.to_json()} if self.venv else {})}

    def refused_at_preflight(self) -> bool:
        """Every rung tried was refused at preflight: the host failed with nothing changed on it (as a deploy's
        --json says it: a script read `"status": "failed"` alike for a host put back and one never touched)."""
        return (self.status == DeployStatus.FAILED and bool(self.attempts) and self.final is None
                and all(a.outcome == Outcome.PREFLIGHT for a in self.attempts))


@dataclass
class Draft:
    """A tune's result as far as the tune got: what a failure part way reports (the climb says each step)."""

    result: TuneResult

    def now(self, result: TuneResult) -> TuneResult:
        self.result = result
        return result
