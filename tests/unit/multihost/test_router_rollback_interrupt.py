"""A Ctrl-C during `inv rollback --router` is answered at once and the rollback under way ends on its own, then the
router's line says where it is (issue 46, finding 4, a form nobody tried). The twenty-third newcomer's hour pressed
Ctrl-C as it said `router: rolling back to ...`: it printed a bare `interrupted`, exit 130, nothing said of the router;
the rollback ran on the main thread, where the interrupt lands inside any SSH exchange (between the router's stop
and its start too). Real interrupts: SIGINT to the main thread; the rollback itself is a stand-in."""

from __future__ import annotations

import signal
import threading
import time
from types import SimpleNamespace

from fleet.multihost import router_rollback
from fleet.multihost.router_report import RouterReport, RouterRun
from fleet.outcomes import DeployStatus


def test_a_ctrl_c_is_answered_at_once_and_the_rollback_under_way_ends_on_its_own(monkeypatch):
    ended: list[str] = []

    def rollback(hooks, to):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # mid-step: the router restarting
        time.sleep(0.5)
        ended.append("restarted")
        return RouterReport(RouterRun.ROLLBACK, "sbx0", DeployStatus.OK, "sglang-router", 30080, release="r-1c66")

    monkeypatch.setattr(router_rollback, "rollback", rollback)
    said: list[tuple[float, str]] = []
    start = time.monotonic()
    report, stopped = router_rollback.waited(SimpleNamespace(host=SimpleNamespace(name="sbx0")), None,
                                             lambda m: said.append((time.monotonic() - start, m)))
    assert stopped and ended == ["restarted"]  # the rollback under way ended; before: a bare `interrupted`
    assert report.status == DeployStatus.OK and report.release == "r-1c66"
    assert said and said[0][0] < 0.5 and said[0][1].startswith("Ctrl-C: no host starts now; waiting for sbx0 to end "
                                                               "the step under way (the router's rollback ends")
