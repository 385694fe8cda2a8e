"""The one fall-back: nothing served (or a step failed after the stop), so the host goes back to the release
that served before, or is left stopped when there is none, and the new release is closed as failed.

What "stop", "put back" and "close" mean differs by what is deployed (a server on one host, a router, the
nodes of one multi-node server started together); the order, what is reported and the one line that says
where the host was left are written here once. Every operation's fall-back goes through `fall_back`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from fleet.deploy.results import FellBack
from fleet.host.releases import Release
from fleet.host.session import ConnectionLost
from fleet.outcomes import DeployStatus, Outcome, ServerVerdict
from fleet.progress import Progress


class FallBackSteps(Protocol):
    """How one kind of deployment is stopped, put back and closed; `label` names it in the one line
    ("sbx0", "sbx0: router"). A lost link raised by a step goes up: the release stays in progress and the
    next run's recovery finishes the job."""

    @property
    def label(self) -> str: ...

    @property
    def new_release(self) -> str: ...

    def stop(self) -> None:
        """No earlier release: the unit stopped and its GPUs emptied. May raise: reported, not raised."""

    def put_back(self, previous: Release) -> ServerVerdict:
        """`previous`'s files back byte for byte, started and checked. May raise: reported as INSTALL_FAILED."""

    def close_failed(self) -> None:
        """The new release closed as failed; never raises (recovery closes what it could not)."""

    def point_back(self, previous: Release) -> str | None:
        """`current` at `previous` again; what went wrong, or None."""


def fall_back(steps: FallBackSteps, previous: Release | None, why: str, say: Progress) -> FellBack:
    """Back to `previous`, else stopped; the new release closed as failed either way."""
    if previous is None:
        problem = attempted(steps.stop)
        steps.close_failed()
        return nothing_before(steps.label, steps.new_release, why, problem)
    say(f"{why}: rolling back to {previous.id}")
    try:
        outcome, evidence = steps.put_back(previous)
    except ConnectionLost:
        raise
    except Exception as exc:  # e.g. a full disk, a command that failed: said, and the release closed
        outcome, evidence = Outcome.INSTALL_FAILED, f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    if outcome == Outcome.PREFLIGHT:  # refused before anything of it changed: the failed release's unit is stopped
        problem = attempted(steps.stop)
        steps.close_failed()
        return replace(nothing_before(steps.label, steps.new_release, why, problem, f"release {previous.id} was not "
                                      f"put back ({evidence})"), evidence=evidence)
    steps.close_failed()
    if outcome == Outcome.READY:
        return replace(back_on(steps.label, previous, why, steps.point_back(previous)), evidence=evidence)
    return replace(failed_too(steps.label, previous, why, f"{outcome} {evidence}"), evidence=evidence)


def nothing_before(label: str, new_release: str, why: str, problem: str | None = None,
                   instead: str = "there is no earlier release") -> FellBack:
    """No earlier release (or, `instead`, none that may start): the unit is left stopped (and says so when even
    stopping it failed)."""
    return FellBack(DeployStatus.FAILED, new_release, {},
                    f"{label}: {why} and {instead}; the unit is stopped"
                    + (f" (stopping it failed too: {problem})" if problem else ""))


def back_on(label: str, previous: Release, why: str, problem: str | None = None) -> FellBack:
    """`previous` serves again; `problem` when `current` could not be pointed back at it."""
    return FellBack(DeployStatus.ROLLED_BACK, previous.id, previous.config,
                    f"{label}: {why}; back on release {previous.id}" + (f", but {problem}" if problem else ""))


def failed_too(label: str, previous: Release, why: str, what: str) -> FellBack:
    """Putting `previous` back did not serve either: `what` says how it failed."""
    return FellBack(DeployStatus.FAILED, previous.id, previous.config,
                    f"{label}: {why} and the rollback failed too: {what}")


def attempted(step: Callable[[], object]) -> str | None:
    """Run a step whose failure must not stop what follows: its error, or None. A lost link still raises."""
    try:
        step()
    except ConnectionLost:
        raise
    except Exception as exc:  # noqa: BLE001 - reported by the caller, in its one line
        return f"{type(exc).__name__}: {exc}"
    return None
