"""What an attempt, a deploy and a release can end as: one name per outcome, never a bare string.

Log classes (TMA_FAILURE, CUDA_OOM, ...) are outcomes too: an attempt that died of one records the class
(fleet.logs.rules.LogClass). The outcomes here are deploy's own; each has a meaning and a remedy in
playbooks/outcomes/deploy.yaml (fleet.logs.remedies checks that none is missing).
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    READY = "READY"  # served: health and the known answer passed (and the bench gate, when set)
    HANG = "HANG"  # a startup phase outlived its budget
    WRONG_ANSWER = "WRONG_ANSWER"
    HEALTH_FAILED = "HEALTH_FAILED"
    EXITED = "EXITED"  # the unit ended without a line the rules classify
    PREFLIGHT = "PREFLIGHT"  # refused before anything was started
    INSTALL_FAILED = "INSTALL_FAILED"  # the unit or env file could not be written or did not verify
    PERF_REGRESSION = "PERF_REGRESSION"
    BENCH_FAILED = "BENCH_FAILED"
    STOPPED = "STOPPED"  # another node of a multi-node deployment failed first
    INTERRUPTED = "INTERRUPTED"  # the fleet run died mid-deploy (fleet.deploy.recovery closed its release)


# What a check of a server says: (outcome, evidence), the evidence one line a person can read.
ServerVerdict = tuple[str, str]

# The outcomes a remedy entry describes (every one but READY) and a rung's `after:` may name.
DEPLOY_OUTCOMES: frozenset[str] = frozenset(o.value for o in Outcome if o is not Outcome.READY)


class DeployStatus(StrEnum):
    """How a host's deploy, rollback or tune ended."""

    OK = "ok"
    UNCHANGED = "unchanged"  # the current release already serves this playbook
    ROLLED_BACK = "rolled_back"  # nothing served; back on the previous release
    FAILED = "failed"
    DRY_RUN = "dry-run"
    SKIPPED = "skipped"  # a rolling deploy stopped before this host's batch


SERVING = frozenset({DeployStatus.OK, DeployStatus.UNCHANGED})


class ReleaseStatus(StrEnum):
    """A release's state in its manifest."""

    IN_PROGRESS = "in-progress"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
