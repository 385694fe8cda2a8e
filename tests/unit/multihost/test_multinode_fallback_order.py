"""Found by review: multi-node's fall-back closes every node's release as failed before any node is put back; a Ctrl-C
(or the controller's death) in the put-back leaves the nodes stopped with nothing handed to the next run's
recovery. The one fall-back (fleet.deploy.fallback) puts back first and closes after."""
from __future__ import annotations

import pytest
from fakesession import FakeSession
from test_multinode_decisions import deployment  # noqa: F401 - the fixture

from fleet.deploy.hostrun import HostRun
from fleet.deploy.release_run import ReleaseRun
from fleet.host import lock as hostlock
from fleet.host.releases import ReleaseStore
from fleet.multihost import multinode
from fleet.outcomes import ReleaseStatus
from fleet.progress import quiet


def test_ctrl_c_in_the_multinode_put_back_leaves_it_to_recovery(deployment, monkeypatch):  # noqa: F811
    m, steps, said, lost = deployment
    runs = []
    for n in m.nodes:
        n.release.status = ReleaseStatus.IN_PROGRESS
        n.run = ReleaseRun(ReleaseStore.on(FakeSession()), n.release)
        runs.append(n.run)

    def put_back(conn, host, *a):
        steps.append(("put back", host.name))
        raise KeyboardInterrupt  # the operator's Ctrl-C, or the controller dies here

    monkeypatch.setattr(multinode.restore, "put_back", put_back)
    with pytest.raises(KeyboardInterrupt):
        m._fall_back("every rung failed")
    for n, run in zip(m.nodes, runs, strict=True):
        host_run = HostRun(FakeSession(), hostlock.Lock(n.host.name, "t" * 32, {}), None, quiet, releases=[run])
        assert host_run.handed_over(), f"{n.host.name}: stopped, release {run.release.status}: no recovery puts it back"
