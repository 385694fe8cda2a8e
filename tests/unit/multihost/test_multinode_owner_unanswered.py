"""A multi-node fall-back asks the owner rule of every node before any stops (multinode._owner_refused), and a
node whose question raised is skipped ("a node that cannot be asked (lost) fails its own put-back"). A node whose
`systemctl show -p DropInPaths` hung (CommandTimedOut) raised there, so its release was put back and every node
started with drop-ins nobody judged: the owner rule read a hang as "none" (h-adv18)."""

from __future__ import annotations

from test_multinode_decisions import deployment  # noqa: F401 - the fixture

from fleet.deploy.restore import owner_problem
from fleet.host import service
from fleet.multihost import multinode
from fleet.ssh.remote import CommandResult, CommandTimedOut


def test_a_node_whose_drop_ins_do_not_answer_is_not_started_unjudged(deployment, monkeypatch):  # noqa: F811
    m, steps, said, _ = deployment

    def run(conn, host, command, timeout=120.0, **kwargs):
        if "DropInPaths" in command:
            raise CommandTimedOut(f"{host.name}: `{command[:60]}` did not finish within 60s")
        return CommandResult(command, 0, "", "")

    monkeypatch.setattr(service, "run", run)
    monkeypatch.setattr(multinode.restore, "owner_problem", owner_problem)  # the rule itself, not the fixture's
    monkeypatch.setattr(multinode.restore, "verified_copies",
                        lambda store, release: {"/etc/systemd/system/sglang.service": b"[Service]\n"})
    m._fall_back("every rung failed")
    assert not [s for s in steps if s[0] == "start"], steps  # before: ('start', 'n0,n1'): put back unjudged


def test_a_node_whose_owner_question_fails_is_refused_and_a_lost_one_still_skipped(deployment, monkeypatch):  # noqa: F811
    m, steps, said, _ = deployment

    def owner_problem(conn, host, store, release):
        if host.name == "n1":
            raise service.ServiceError("n1: reading /etc/systemd/system/sglang.service.d/x.conf: Is a directory")
        return None

    monkeypatch.setattr(multinode.restore, "owner_problem", owner_problem)
    m._fall_back("every rung failed")
    assert not [s for s in steps if s[0] == "start"], steps  # before: started, n1's drop-ins never judged


def test_a_lost_node_is_still_left_to_its_own_put_back(deployment, monkeypatch):  # noqa: F811
    from fleet.errors import ConnectError

    m, steps, said, _ = deployment

    def owner_problem(conn, host, store, release):
        if host.name == "n1":
            raise ConnectError("n1: connection lost")
        return None

    monkeypatch.setattr(multinode.restore, "owner_problem", owner_problem)
    assert multinode.MultiNode._owner_refused(m, m.nodes) is None
