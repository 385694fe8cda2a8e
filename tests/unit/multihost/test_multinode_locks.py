"""Found by review (stop 44): a multi-node deploy whose body loses ONE node's link must still release the locks of
the nodes whose links are fine (before the run skeleton, every node was unlocked whatever the body raised)."""

from __future__ import annotations

import pytest
from fakesession import FakeSession
from test_multinode_plan import hosts
from test_multinode_rollback import BOOK

from fleet import playbook
from fleet.multihost import multinode
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import ConnectionLost


class Session(FakeSession):
    """`dead`: its link is gone (what lost_link finds on a closed transport); `probe_error`: what its probe raises
    (else it probes fine)."""

    dead = False
    probe_error: BaseException | None = None

    def lost(self, where, exc=None):
        if self.dead and exc is not None:
            raise ConnectionLost(f"{self.host.name}: connection lost {where}: the link dropped")

    def probe(self, say=None):
        if self.probe_error is not None:
            raise self.probe_error
        return object()


class Store:
    def __init__(self, conn, host):
        pass

    def current(self):
        return None


def deployment(tmp_path, sessions):
    """Two nodes on `sessions`, nothing left behind to recover, no release yet."""
    path = tmp_path / "two.yaml"
    path.write_text(BOOK)
    return multinode.MultiNode(hosts(2), playbook.load(path), path, ConnectOptions(), lambda h: lambda m: None, {},
                               sessions=lambda host, opts: sessions[host.name], stores=Store,
                               recover=lambda book, unit, say: lambda s, lock: [])


def test_a_node_lost_while_probing_leaves_the_healthy_nodes_unlocked(tmp_path):
    sessions = {h.name: Session(host=h) for h in hosts(2)}
    sessions["n1"].probe_error = ConnectionLost("n1: connection lost mid-probe: the link dropped")
    with pytest.raises(ConnectionLost):
        deployment(tmp_path, sessions).run()
    # n1's link is gone: its lock is the next run's recovery's. n0's link is fine: it must be unlocked.
    assert "unlock" in sessions["n0"].sent, sessions["n0"].sent


def test_a_node_whose_sftp_call_hits_a_dead_link_leaves_the_healthy_nodes_unlocked(tmp_path):
    """The body's plain EOFError is n1's; n1's run turns it into ConnectionLost, which the ExitStack then hands
    to n0's run: n0, whose link is fine, keeps its lock."""
    sessions = {h.name: Session(host=h) for h in hosts(2)}
    sessions["n1"].dead, sessions["n1"].probe_error = True, EOFError()
    with pytest.raises(ConnectionLost):
        deployment(tmp_path, sessions).run()
    assert "unlock" not in sessions["n1"].sent  # the lost node: left to the next run's recovery
    assert "unlock" in sessions["n0"].sent, sessions["n0"].sent
