"""`inv exec` says where its commands stand while they run (issue 46, finding 5; the eighteenth newcomer's hour): a
command of 40 s showed nothing at all until the table, on a terminal or off one, up to its --timeout (120 s by
default, a day at most), and which host was still running was not said."""

from __future__ import annotations

import threading
from pathlib import Path

from ticking import Said

from fleet.host import execute
from fleet.host.session import CommandResult
from fleet.inventory import Host


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address=f"10.0.0.{i}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


def test_the_hosts_done_and_those_still_running_are_said_while_the_commands_run():
    said = Said()
    h0_done = threading.Event()

    def one(host: Host) -> CommandResult:
        if host.name == "h1":  # the slow host: its command runs until where the others stand was said
            assert h0_done.wait(10)
            assert said.ticked.wait(10), said
        return CommandResult("x", 0, f"{host.name}\n", "")

    def first(host: Host) -> CommandResult:
        try:
            return one(host)
        finally:
            if host.name == "h0":
                h0_done.set()

    outcomes = execute.each(hosts(2), first, 120.0, progress=said)
    assert [o.ok for o in outcomes] == [True, True]
    live = [str(m) for m in said]
    assert any(m.startswith("phase exec: ") and m.endswith("of 120s budget; 1 of 2 hosts done, still running: h1")
               for m in live), live
