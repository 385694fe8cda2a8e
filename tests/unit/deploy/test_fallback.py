"""fleet.deploy.fallback.fall_back, the one fall-back, over steps that record what was done: the order (put back
before the new release is closed, so a lost link leaves it to recovery), what a failing step turns into, and
the one line for each way it ends."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from fleet.deploy import fallback
from fleet.host.releases import Release
from fleet.outcomes import DeployStatus, Outcome, ServerVerdict
from fleet.ssh.remote import ConnectionLost

OLD = Release(id="r-old", host="h1", playbook="p", playbook_sha256="0" * 64, created="2026-12-01T00:00:00Z",
              rung="plain", config={"rung": "plain"})


@dataclass
class Steps:
    """Steps that log their calls; each may be told to raise or to answer something else."""

    verdict: ServerVerdict = (Outcome.READY, "up, /health 200")
    stop_raises: Exception | None = None
    put_back_raises: BaseException | None = None
    point_back_problem: str | None = None
    done: list[str] = field(default_factory=list)
    label: str = "h1"
    new_release: str = "r-new"

    def stop(self) -> None:
        self.done.append("stop")
        if self.stop_raises:
            raise self.stop_raises

    def put_back(self, previous: Release) -> ServerVerdict:
        self.done.append(f"put back {previous.id}")
        if self.put_back_raises:
            raise self.put_back_raises
        return self.verdict

    def close_failed(self) -> None:
        self.done.append("close")

    def point_back(self, previous: Release) -> str | None:
        self.done.append(f"point at {previous.id}")
        return self.point_back_problem


def test_back_on_the_previous_release_put_back_then_closed_then_pointed_at():
    steps, said = Steps(), []
    fell = fallback.fall_back(steps, OLD, "every rung failed", said.append)
    assert steps.done == ["put back r-old", "close", "point at r-old"]
    assert fell.status == DeployStatus.ROLLED_BACK and fell.served_again
    assert (fell.release, fell.config, fell.evidence) == ("r-old", {"rung": "plain"}, "up, /health 200")
    assert fell.error == "h1: every rung failed; back on release r-old"
    assert said == ["every rung failed: rolling back to r-old"]


def test_current_not_pointed_back_is_said():
    fell = fallback.fall_back(Steps(point_back_problem="current still names r-new"), OLD, "why", print)
    assert fell.served_again and fell.error.endswith("back on release r-old, but current still names r-new")


def test_no_earlier_release_leaves_the_unit_stopped_and_the_new_release_closed():
    steps = Steps()
    fell = fallback.fall_back(steps, None, "exited: TMA", print)
    assert steps.done == ["stop", "close"]
    assert (fell.status, fell.release, fell.config) == (DeployStatus.FAILED, "r-new", {})
    assert fell.error == "h1: exited: TMA and there is no earlier release; the unit is stopped"


def test_a_stop_that_fails_is_said_not_raised():
    fell = fallback.fall_back(Steps(stop_raises=OSError(28, "No space left on device")), None, "why", print)
    assert fell.status == DeployStatus.FAILED
    assert fell.error.endswith("the unit is stopped (stopping it failed too: OSError: [Errno 28] No space left on "
                               "device)")


def test_a_previous_release_that_does_not_serve_either_fails_with_its_verdict():
    steps = Steps(verdict=(Outcome.EXITED, "exit 1 before READY"))
    fell = fallback.fall_back(steps, OLD, "hang", print)
    assert steps.done == ["put back r-old", "close"]  # `current` is not pointed at what does not serve
    assert (fell.status, fell.release) == (DeployStatus.FAILED, "r-old")
    assert fell.error == "h1: hang and the rollback failed too: EXITED exit 1 before READY"


def test_a_put_back_that_raises_is_an_install_failure_and_the_release_still_closes():
    steps = Steps(put_back_raises=ValueError("the generation answered something that is not JSON"))
    fell = fallback.fall_back(steps, OLD, "why", print)
    assert steps.done == ["put back r-old", "close"]
    assert fell.status == DeployStatus.FAILED
    assert "the rollback failed too: INSTALL_FAILED ValueError: the generation answered" in fell.error


def test_a_lost_link_goes_up_and_leaves_the_release_in_progress_for_recovery():
    steps = Steps(put_back_raises=ConnectionLost("h1: the link dropped"))
    with pytest.raises(ConnectionLost):
        fallback.fall_back(steps, OLD, "why", print)
    assert steps.done == ["put back r-old"]  # not closed: the next run's recovery finishes it
