"""A multi-node deployment's one run (fleet.multihost.multinode: a deploy or a rollback over every node) answers
Ctrl-C as a deploy of several hosts does (docs/cli.md#ctrl-c): at once, naming its nodes; the run under way ends on
its own (a deploy that has changed no node yet stops before it does; one whose rung fails falls back on every
node); a second Ctrl-C stops waiting. It ran on the main thread, so a Ctrl-C ended it wherever it was, every node
left stopped, with a bare `interrupted` (issue 46, finding 4; newcomer h-new17)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fleet import parallel
from fleet.deploy.results import DeployResult
from fleet.inventory import Host
from fleet.multihost.rolling import DeployInterrupted
from fleet.outcomes import DeployStatus


def together(hosts: Sequence[Host], run: Callable[[], list[DeployResult]], notice: Callable[[str], None] | None,
             doing: str = "deploying", ends: str = parallel.DEPLOY_ENDS) -> list[DeployResult]:
    """`run()` (every node's result) on a worker thread; Ctrl-C: DeployInterrupted with every node's result, as it
    ended or, where a second Ctrl-C stopped the wait, `interrupted while {doing}`."""
    nodes = ", ".join(h.name for h in hosts)
    try:
        [outcome] = parallel.run_all(hosts[:1], lambda _: run(), notice=notice, ends=ends, left=parallel.DEPLOY_LEFT,
                                     name_of=lambda _: nodes)
    except parallel.Interrupted as stop:
        raise DeployInterrupted(_results(hosts, stop.outcomes[0], doing)) from None
    return _results(hosts, outcome, doing)


def _results(hosts: Sequence[Host], outcome: parallel.HostOutcome[list[DeployResult]] | None,
             doing: str) -> list[DeployResult]:
    if outcome is None:  # a second Ctrl-C: the run was left mid-step
        return [DeployResult(h.name, DeployStatus.FAILED, error=f"{h.name}: interrupted while {doing}; the next deploy "
                             "or rollback there takes over its lock and recovers what it left") for h in hosts]
    if not outcome.ok or outcome.value is None:
        return [DeployResult(h.name, DeployStatus.FAILED, error=outcome.error, unreached=outcome.unreached)
                for h in hosts]
    return outcome.value
