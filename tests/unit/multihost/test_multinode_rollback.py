"""A multi-node rollback whose move of `current` fails on one node (fleet.multihost.multinode.MultiNode._rollback):
the nodes end on one release, the one they ran before, and the node whose move failed is put back too. The nodes'
release stores and the put-back-and-start step are stand-ins; the rollback's own logic runs."""

from __future__ import annotations

from pathlib import Path

from fleet import playbook
from fleet.errors import FleetError
from fleet.host.releases import Release
from fleet.inventory import Host
from fleet.multihost import multinode
from fleet.outcomes import DeployStatus, Outcome
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import CommandTimedOut

BOOK = """name: two
model: {path: /models/m}
nodes: {count: 2, dist_port: 5757}
flags: {tp-size: 8, pp-size: 2}
ladder:
  - name: base
"""


def _release(rid: str, host: str) -> Release:
    return Release(id=rid, host=host, playbook="two", playbook_sha256="0" * 64, created="now", rung="base",
                   status="ok")


class Store:
    """One node's release store: `current` and the moves asked of it; a move to `fail_on` fails as a full disk."""

    def __init__(self, host: str, fail_on: str | None = None):
        self.host, self.fail_on, self.moves = host, fail_on, []
        self.cur: Release | None = _release("r2-new", host)

    def current(self):
        return self.cur

    def load(self, rid):
        return _release(rid, self.host)

    def mark_current(self, release):
        self.moves.append(release.id)
        if release.id == self.fail_on:
            raise FleetError(f"{self.host}: `ln -s ...` failed (exit 1): mv: No space left on device")
        self.cur = release

    def clear_current(self):
        self.cur = None


class Rolling(multinode.MultiNode):
    """Rolls back to r1-old, and puts back and starts every node together (logged in `started`) as READY."""

    started: list[tuple[str, list[str]]]

    def _rollback_target(self, to):
        return "r1-old"

    def _put_back_and_start(self, nodes, label):
        self.started.append((label, [n.prior.id for n in nodes]))
        return Outcome.READY, "both nodes serve"


def _two_nodes(tmp_path, stores):
    path = tmp_path / "two.yaml"
    path.write_text(BOOK)
    hosts = [Host(name=f"n{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                  known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                  source=Path("hosts.yaml")) for i in range(2)]
    mn = Rolling(hosts, playbook.load(path), path, ConnectOptions(), lambda h: lambda m: None, {},
                 stores=lambda conn, host: stores[host.name])
    mn.started = []
    for n in mn.nodes:
        n.conn = None
    return mn, mn.started


def test_a_failed_move_of_current_on_one_node_puts_every_node_back_on_what_it_ran(tmp_path):
    stores = {"n0": Store("n0"), "n1": Store("n1", fail_on="r1-old")}
    mn, started = _two_nodes(tmp_path, stores)
    mn._rollback(None)
    # the target came up on both; n1's move failed, so n0's `current` went back, and both were put back and started
    assert started == [("rollback", ["r1-old", "r1-old"]), ("restore", ["r2-new", "r2-new"])]
    assert stores["n0"].moves == stores["n1"].moves == ["r1-old", "r2-new"]  # n1 too: its move may have run
    assert stores["n0"].cur.id == stores["n1"].cur.id == "r2-new"
    for n in mn.nodes:
        assert n.result.status != DeployStatus.OK and n.result.release == "r2-new"
        assert "rollback to r1-old served, but making it current on n1 failed" in n.result.error
        assert "No space left on device" in n.result.error and n.result.error.endswith("back on r2-new")


class LateStore(Store):
    """The rename over `current` ran on the node; its answer did not come back, and reading `current` again did not
    either (ReleaseStore.mark_current then raises the timeout)."""

    def mark_current(self, release):
        self.moves.append(release.id)
        self.cur = release
        if release.id == self.fail_on:
            raise CommandTimedOut(f"{self.host}: `ln -s ...` did not end within 120s")


def test_a_node_whose_move_ran_but_whose_answer_was_lost_is_pointed_back_with_the_others(tmp_path):
    """It used to be left out of the point-back (it was not among the nodes that moved): it served r2-new's files
    while its `current` named r1-old, and the next run's recovery would have put r1-old back on it alone."""
    stores = {"n0": Store("n0"), "n1": LateStore("n1", fail_on="r1-old")}
    mn, started = _two_nodes(tmp_path, stores)
    mn._rollback(None)
    assert started[-1] == ("restore", ["r2-new", "r2-new"])
    assert stores["n0"].cur.id == stores["n1"].cur.id == "r2-new"
    assert stores["n1"].moves == ["r1-old", "r2-new"]
    assert all("did not end within 120s" in n.result.error for n in mn.nodes)


def test_when_every_move_succeeds_the_rollback_is_ok_and_nothing_goes_back(tmp_path):
    stores = {"n0": Store("n0"), "n1": Store("n1")}
    mn, started = _two_nodes(tmp_path, stores)
    mn._rollback(None)
    assert started == [("rollback", ["r1-old", "r1-old"])]
    assert [s.cur.id for s in stores.values()] == ["r1-old", "r1-old"]
    assert all(n.result.status == DeployStatus.OK and not n.result.error for n in mn.nodes)
