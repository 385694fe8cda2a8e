"""MultiNode's decisions (fleet.multihost.multinode): in a fall-back, which nodes go back and whether they are
started together; whether a deployment is UNCHANGED. The steps on hosts are replaced (stop, put back, start
together, the files' and units' checks); what a node's release store says and what fails are given per test."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fakesession import FakeSession

from fleet import playbook
from fleet.host.releases import Release
from fleet.inventory import Host
from fleet.multihost import multinode
from fleet.outcomes import DeployStatus, Outcome
from fleet.ssh.connect import ConnectOptions

BOOK = "name: two\nmodel: {path: /models/m}\nnodes: {count: 2, dist_port: 5757}\nflags: {tp-size: 4}\n" \
       "ladder:\n  - name: base\n"


def hosts(n: int) -> list[Host]:
    return [Host(name=f"n{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


class Run:
    """A node's ReleaseRun: fail() raises `error` when given (a full disk on that node)."""

    def __init__(self, error: Exception | None = None):
        self.error, self.failed = error, False

    def fail(self) -> None:
        if self.error:
            raise self.error
        self.failed = True


class Store:
    def __init__(self, current: str):
        self.now = current

    def current_id(self) -> str:
        return self.now

    def mark_current(self, release: Release) -> None:
        self.now = release.id


class Deployment(multinode.MultiNode):
    """Starts nodes together by logging it in `steps` (they serve); a rollback's target is `target` when given,
    and then a node is not re-aimed at its previous release (the test's stores say what it runs)."""

    steps: list[tuple[str, str]]
    target: str | None = None

    def _start_together(self, nodes, label):
        self.steps.append(("start", ",".join(n.host.name for n in nodes)))
        return Outcome.READY, "all 2 nodes up"

    def _rollback_target(self, to):
        return self.target if self.target is not None else super()._rollback_target(to)

    def _aim_at_previous(self, n):
        if self.target is None:
            super()._aim_at_previous(n)


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    """Two nodes on B ("r-b") trying "r-new"; every step on hosts recorded; the start together serves."""
    path = tmp_path / "two.yaml"
    path.write_text(BOOK)
    said: list[str] = []
    m = Deployment(hosts(2), playbook.load(path), path, ConnectOptions(),
                   lambda h: lambda msg: said.append(f"{h.name} {msg}"), {})
    steps: list[tuple[str, str]] = []
    m.steps = steps
    lost: set[str] = set()

    def step(what: str, host: Host) -> None:
        if host.name in lost:
            raise OSError("connection lost")
        steps.append((what, host.name))

    class Stops(FakeSession):
        def stop_and_empty_gpus(self, unit, budget, log):
            step("stop", self.host)
            return []

    monkeypatch.setattr(multinode.restore, "put_back", lambda conn, host, *a: step("put back", host))
    # the fake stores answer no owner question (it raised, and a node it raised on was skipped): the rule passes here;
    # test_multinode_owner and test_multinode_owner_unanswered ask it
    monkeypatch.setattr(multinode.restore, "owner_problem", lambda conn, host, store, release: None)
    for n in m.nodes:
        n.session, n.conn = Stops(n.host), None  # type: ignore[assignment]
        n.run = Run()  # type: ignore[assignment]
        n.store = Store("r-b")  # type: ignore[assignment]
        n.release = Release(id="r-new", host=n.host.name, playbook="two", playbook_sha256="0" * 64, created="now")
        n.previous = Release(id="r-b", host=n.host.name, playbook="two", playbook_sha256="0" * 64, created="then",
                             status="ok", config={"nodes": {"rank": n.rank}},
                             files={"/etc/systemd/system/sglang.service": {"sha256": "0" * 64, "mode": 420}})
    return m, steps, said, lost


def test_a_node_whose_release_cannot_be_closed_still_goes_back_with_the_others(deployment):
    """Found by the many-host fault harness: a full disk on node 1 made closing its release fail; it counted as
    lost, and node 0 was left stopped, so the deployment served nothing while both nodes could go back."""
    m, steps, said, _ = deployment
    m.nodes[1].run = Run(OSError("writing manifest.json: No space left on device"))  # type: ignore[assignment]
    m._fall_back("rung base broke off")
    assert ("start", "n0,n1") in steps
    assert [(r.host, r.status, r.release) for r in (n.result for n in m.nodes)] == \
        [("n0", DeployStatus.ROLLED_BACK, "r-b"), ("n1", DeployStatus.ROLLED_BACK, "r-b")]
    assert any(s.startswith("n1 closing release r-new as failed did not work") and "recovery closes it" in s
               for s in said), said


def test_a_lost_node_keeps_the_others_stopped_on_their_previous_files(deployment):
    m, steps, said, lost = deployment
    lost.add("n1")
    m.nodes[1].run = Run(OSError("connection lost"))  # type: ignore[assignment]
    m._fall_back("rung base broke off")
    assert not [s for s in steps if s[0] == "start"]  # the rest alone would wait for the lost rank
    assert ("put back", "n0") in steps
    assert all(r.status == DeployStatus.FAILED for r in (n.result for n in m.nodes))
    assert any("n1 could not go back, so the other nodes are left stopped" in s for s in said), said


def test_a_deployment_whose_nodes_run_other_files_than_its_release_is_not_unchanged(deployment, monkeypatch):
    """Found by the many-host fault harness (nodes-rollback, kill at `current`'s move, and a link lost while the
    target started): the nodes ran the rollback's target while `current` still named B, and the next deploy of B
    said UNCHANGED and left them so. Now every node must run its current release's files."""
    m, _, _, _ = deployment
    runs: dict[str, bool] = {"n0": True, "n1": True}
    for n in m.nodes:
        n.previous = n.previous.__class__(**{**n.previous.__dict__, "playbook_sha256": m.book_sha})
        n.deployer.serve = replace(n.deployer.serve, secrets={})  # no key to compare: unchanged
    def sums(n):  # sha256sum on a node: its release's own files, or others; its unit active
        def answer(cmd):
            if cmd.startswith("systemctl show"):
                return 0, "ActiveState=active\n"
            return 0, "".join(f"{meta['sha256'] if runs[n.host.name] else 'f' * 64}  {path}\n"
                              for path, meta in n.previous.files.items())
        return answer

    for n in m.nodes:
        n.session = FakeSession(n.host, answer=sums(n))
    monkeypatch.setattr(multinode, "health_check", lambda conn, host, book: (Outcome.READY, "healthy"))
    assert m._unchanged()
    runs["n1"] = False
    assert not m._unchanged()


class RollbackStore(Store):
    """A node's releases r-a (the target) and r-b (current); moving `current` to `refuse` fails."""

    def __init__(self, host: str, refuse: str | None = None):
        super().__init__("r-b")
        self.host, self.refuse = host, refuse
        self.rel = {rid: Release(id=rid, host=host, playbook="two", playbook_sha256="0" * 64, created=rid,
                                 status="ok", rung="base", config={"nodes": {"rank": int(host[1])}},
                                 files={"/etc/systemd/system/sglang.service": {"sha256": "0" * 64, "mode": 420}})
                    for rid in ("r-a", "r-b")}

    def load(self, rid: str) -> Release:
        return self.rel[rid]

    def current(self) -> Release:
        return self.rel[self.now]

    def mark_current(self, release: Release) -> None:
        if release.id == self.refuse:
            raise OSError("fleet fault hook: injected failure")
        super().mark_current(release)


def test_a_rollback_whose_move_of_current_fails_on_a_node_puts_every_node_back(deployment, monkeypatch):
    """Found by the many-host fault harness (nodes-rollback, fail at `current`'s move on a node): the target served
    on both nodes, the move failed, the run ended in a traceback with both nodes on A's files and `current` B. Now
    the nodes already moved move back and every node goes back to B together, as when the target fails."""
    m, steps, said, _ = deployment
    stores = {"n0": RollbackStore("n0"), "n1": RollbackStore("n1", refuse="r-a")}
    m.stores, m.target = lambda conn, host: stores[host.name], "r-a"
    m._rollback(None)
    assert [s.now for s in stores.values()] == ["r-b", "r-b"]  # n0 moved to r-a, then back
    assert [s for s in steps if s[0] == "start"] == [("start", "n0,n1"), ("start", "n0,n1")]  # target, then B
    for n in m.nodes:
        assert n.result.status == DeployStatus.FAILED and n.result.release == "r-b"
        assert "rollback to r-a served, but making it current on n1 failed" in n.result.error  # issue 31's words
        assert "fleet fault hook: injected failure" in n.result.error and "back on r-b" in n.result.error


def test_each_nodes_stop_in_a_fall_back_is_said_with_its_budget(deployment):
    """issue 46, finding 5 (the fifteenth newcomer's hour): a multi-node fall-back (and its deploy's and
    rollback's stops) went silent through each node's stop, up to the playbook's stop budget a node."""
    m, steps, said, _ = deployment
    m._fall_back("rung base broke off")
    assert [s for s in steps if s[0] == "stop"] == [("stop", "n1"), ("stop", "n0")]
    budget = f"{m.book.budgets.stop:.0f}s"
    assert f"n1 stopping sglang and emptying the GPUs (budget {budget})" in said, said
    assert f"n0 stopping sglang and emptying the GPUs (budget {budget})" in said, said
