"""Found by review (h-adv15, stop 54): a
deploy's fall-back whose put-back the owner rule refuses (restore.restore's PREFLIGHT,
asked before anything stops). The last rung's server was never stopped (a health check or a bench gate that failed
leaves it running), and nothing stops it now: the host runs the new release's unit, closed FAILED, while the result
names the previous release and says 'the rollback failed too' (what runs is misreported; `current` names the previous
release, whose files are not installed). Fails on dbbc9f2."""

from __future__ import annotations

from fleet.deploy import fallback
from fleet.host.releases import Release
from fleet.outcomes import Outcome, ReleaseStatus

REFUSED = "venv /opt/ml-env is ops (uid 1000)'s, and the unit runs as root (serve.user: root)"


class Steps:
    label, new_release = "h1", "20261202T000000Z-bbbb"

    def __init__(self):
        self.done: list[str] = []

    def stop(self):
        self.done.append("stop")

    def put_back(self, previous):  # restore.restore: the owner rule refused, before anything stopped
        return Outcome.PREFLIGHT, REFUSED

    def close_failed(self):
        self.done.append("closed failed")

    def point_back(self, previous):
        self.done.append("point back")


def test_a_refused_put_back_says_what_the_host_runs_now():
    old = Release(id="20261201T000000Z-aaaa", host="h1", playbook="p", playbook_sha256="x", created="t",
                  status=ReleaseStatus.OK, rung="a")
    steps = Steps()
    fell = fallback.fall_back(steps, old, "every rung failed", lambda m: None)  # type: ignore[arg-type]
    # what holds: the failed release's unit is stopped (as with no earlier release) and closed; the result names
    # it, and says the previous one was not put back and why
    assert fell.release == steps.new_release, fell  # before: the previous id, its config: what serves misreported
    assert steps.done == ["stop", "closed failed"], steps.done  # before: ['closed failed']: the failed server ran on
    assert fell.error == (f"h1: every rung failed and release {old.id} was not put back ({REFUSED}); the unit is "
                          "stopped"), fell.error  # before: 'the rollback failed too'
