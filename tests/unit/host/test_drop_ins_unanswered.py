"""A host whose `systemctl show -p DropInPaths` does not answer (a hung systemd: CommandTimedOut after 60 s) or
answers without end (OutputTooLarge) cannot say its drop-ins either: drop_ins raised those as they came, past the
ServiceError its callers turn into a refusal line, so the dry run's "why", the deploy's preflight and the put-back's
owner rule ended as a bare exception (the fall-back's put-back as "the rollback failed too: install-failed
CommandTimedOut", the failed release's unit left as it was) (h-adv18)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fleet.deploy import restore
from fleet.host import service
from fleet.inventory import Host
from fleet.ssh.remote import CommandResult, CommandTimedOut, OutputTooLarge

HOST = Host(name="sbx0", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
            known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
            source=Path("hosts.yaml"))
UNIT = "/etc/systemd/system/sglang.service"


@pytest.fixture(params=[CommandTimedOut("sbx0: `systemctl show -p DropInPaths --value -- sglang.service` did not "
                                        "finish within 60s; the channel was closed (the host is slow, stuck or "
                                        "hostile)"),
                        OutputTooLarge("sbx0: `systemctl show` sent more than 4 MiB on stdout")])
def unanswered(request, monkeypatch):
    def run(conn, host, command, timeout=120.0, **kwargs):
        if "DropInPaths" in command:
            raise request.param
        return CommandResult(command, 0, "", "")
    monkeypatch.setattr(service, "run", run)
    return str(request.param)


def test_drop_ins_that_do_not_come_are_a_service_error(unanswered):
    with pytest.raises(service.ServiceError) as refused:
        service.drop_ins(None, HOST, UNIT)  # type: ignore[arg-type]
    assert unanswered in str(refused.value)


def test_the_preflight_and_the_owner_rule_refuse_in_one_line(unanswered, monkeypatch):
    monkeypatch.setattr(restore, "verify_unit_text", lambda *args: None)
    planned = SimpleNamespace(unit_text="[Service]\nExecStart=/v/bin/python\n")
    why = restore.unit_problem(None, HOST, planned, UNIT)  # type: ignore[arg-type]
    assert why == f"fleet cannot read the drop-ins systemd would apply over the unit: {unanswered}"
    monkeypatch.setattr(restore, "verified_copies", lambda store, release: {UNIT: b"[Service]\n"})
    why = restore.owner_problem(None, HOST, None, None)  # type: ignore[arg-type]
    assert why is not None and why.startswith("fleet cannot read the drop-ins systemd would apply over the unit, so "
                                              "the owner rule cannot judge: ")


def test_a_systemctl_that_fails_a_moment_is_asked_once_more(monkeypatch):
    """A put-back in a deploy's fall-back asks the drop-ins after the server stopped: one refused question (systemd
    re-executing under a package upgrade: `Failed to connect to bus`) refused the put-back and left the host
    serving nothing; it is asked once more, 2 s later. Two failures are still a refusal."""
    answers = [CommandResult("systemctl show", 1, "", "Failed to connect to bus: Connection refused"),
               CommandResult("systemctl show", 0, "/etc/systemd/system/sglang.service.d/x.conf\n", "")]
    asked: list[str] = []
    monkeypatch.setattr(service, "run", lambda conn, host, command, timeout=120.0, **kw: (
        asked.append(command), answers.pop(0))[1])
    monkeypatch.setattr(service.time, "sleep", lambda s: asked.append(f"sleep {s:g}"))
    assert service.drop_ins(None, HOST, UNIT) == ["/etc/systemd/system/sglang.service.d/x.conf"]  # type: ignore[arg-type]
    assert asked[1] == "sleep 2" and len(asked) == 3
    answers[:] = [CommandResult("systemctl show", 1, "", "Failed to connect to bus: Connection refused")] * 2
    with pytest.raises(service.ServiceError, match="Failed to connect to bus"):
        service.drop_ins(None, HOST, UNIT)  # type: ignore[arg-type]
