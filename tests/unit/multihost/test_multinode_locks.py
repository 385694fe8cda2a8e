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


def test_a_node_lost_while_probing_leaves_the_healthy_nodes_unlocked(tmp_path, monkeypatch):
    path = tmp_path / "two.yaml"
    path.write_text(BOOK)
    nodes = hosts(2)
    mn = multinode.MultiNode(nodes, playbook.load(path), path, ConnectOptions(), lambda h: lambda m: None, {})
    sessions = {h.name: FakeSession(host=h) for h in nodes}
    monkeypatch.setattr(multinode.HostSession, "open", classmethod(lambda cls, host, opts: sessions[host.name]))
    monkeypatch.setattr(multinode, "deploy_recovery", lambda book, unit, say: lambda s, lock: [])

    def probe_on(conn, host):
        if host.name == "n1":
            raise ConnectionLost("n1: connection lost mid-probe: the link dropped")
        return object()

    monkeypatch.setattr(multinode.probe_run, "probe_on", probe_on)

    class Store:
        def __init__(self, conn, host):
            pass

        def current(self):
            return None

    monkeypatch.setattr(multinode, "ReleaseStore", Store)
    with pytest.raises(ConnectionLost):
        mn.run()
    # n1's link is gone: its lock is the next run's recovery's. n0's link is fine: it must be unlocked.
    assert "unlock" in sessions["n0"].sent, sessions["n0"].sent


class Session(FakeSession):
    """`dead`: its link is gone (what lost_link finds on a closed transport)."""

    dead = False

    def lost(self, where, exc=None):
        if self.dead and exc is not None:
            raise ConnectionLost(f"{self.host.name}: connection lost {where}: the link dropped")


def test_a_node_whose_sftp_call_hits_a_dead_link_leaves_the_healthy_nodes_unlocked(tmp_path, monkeypatch):
    """The body's plain EOFError is n1's; n1's run turns it into ConnectionLost, which the ExitStack then hands
    to n0's run: n0, whose link is fine, keeps its lock."""
    path = tmp_path / "two.yaml"
    path.write_text(BOOK)
    nodes = hosts(2)
    mn = multinode.MultiNode(nodes, playbook.load(path), path, ConnectOptions(), lambda h: lambda m: None, {})
    sessions = {h.name: Session(host=h) for h in nodes}
    sessions["n1"].dead = True
    monkeypatch.setattr(multinode.HostSession, "open", classmethod(lambda cls, host, opts: sessions[host.name]))
    monkeypatch.setattr(multinode, "deploy_recovery", lambda book, unit, say: lambda s, lock: [])

    def probe_on(conn, host):
        if host.name == "n1":
            raise EOFError()
        return object()

    class Store:
        def __init__(self, conn, host):
            pass

        def current(self):
            return None

    monkeypatch.setattr(multinode.probe_run, "probe_on", probe_on)
    monkeypatch.setattr(multinode, "ReleaseStore", Store)
    with pytest.raises(ConnectionLost):
        mn.run()
    assert "unlock" not in sessions["n1"].sent  # the lost node: left to the next run's recovery
    assert "unlock" in sessions["n0"].sent, sessions["n0"].sent
