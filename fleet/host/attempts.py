"""The attempts a release recorded (each fleet.deploy.results.Attempt's to_json, read back as the host sent it) that
did not serve, each named by its number and rung: a rung a deploy fell back from, or a tune's trial that crashed or
lost, is that attempt's failure, never the release's (its rung served). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.outcomes import Outcome


@dataclass(frozen=True)
class FailedAttempt:
    """One attempt of a release's run that did not serve (a rung that crashed, or a tune's trial that lost): its
    number in the run (1 first), its rung and its outcome. A release that served has them only as what was tried on
    the way: they are the attempts', never the release's (its rung served)."""

    number: int
    rung: str
    outcome: str
    evidence: str | None = None
    lost_to: str | None = None  # a tune's trial that served slower than the rung the tune kept: nothing to act on


_NOT_FAILED = (Outcome.READY, "apply", "revert", None)  # served, or a patch step's record


def failed_attempts(attempts: object) -> list[FailedAttempt]:
    """The attempts recorded in a release (each Attempt's to_json, as the host sent it) that did not serve, in order;
    what is not an attempt's shape is left out."""
    found = []
    for number, a in enumerate(attempts if isinstance(attempts, list) else [], 1):
        if isinstance(a, dict) and a.get("outcome") not in _NOT_FAILED:
            evidence, lost_to = a.get("evidence"), a.get("lost_to")
            found.append(FailedAttempt(number, str(a.get("rung") or "?")[:64], str(a.get("outcome"))[:64],
                                       evidence[:300] if isinstance(evidence, str) else None,
                                       lost_to[:64] if isinstance(lost_to, str) else None))
    return found
