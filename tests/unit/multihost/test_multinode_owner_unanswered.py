"""A multi-node fall-back asks the owner rule of every node before any stops (multinode._owner_refused), and a
node whose question raised is skipped ("a node that cannot be asked (lost) fails its own put-back"). A node whose
`systemctl show -p DropInPaths` hung (CommandTimedOut) raised there, so its release was put back and every node
started with drop-ins nobody judged: the owner rule read a hang as "none" (h-adv18)."""

from __future__ import annotations

from test_multinode_decisions import deployment  # noqa: F401 - the fixture

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
    monkeypatch.setattr(multinode.restore, "verified_copies",
                        lambda store, release: {"/etc/systemd/system/sglang.service": b"[Service]\n"})
    m._fall_back("every rung failed")
    assert not [s for s in steps if s[0] == "start"], steps  # before: ('start', 'n0,n1'): put back unjudged
