"""Ctrl-C during `inv exec` (issue 46 finding 4, found again by the newcomer's third hour): `inv exec --cmd 'sleep 25'`
said nothing for 22 s after Ctrl-C, then a bare 'interrupted', exit 130, no row for the host: its command's
--timeout (120 s by default) is how long an operator could wait unanswered. Now the first Ctrl-C is answered at once
on stderr, a second stops waiting, and the run ends with every host's row, exit 130. A real SIGINT, as the terminal
sends it."""

from __future__ import annotations

import functools
import json
import signal
import threading
import time
from pathlib import Path

import pytest

from fleet.cli import execute as exec_cmd
from fleet.host import execute
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import CommandResult

PRESS = functools.partial(signal.pthread_kill, threading.main_thread().ident, signal.SIGINT)


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


@pytest.mark.parametrize("again", [False, True])
def test_ctrl_c_in_exec_is_answered_at_once_and_ends_with_every_host_s_row(capsys, again):
    h1_done = threading.Event()

    def one(host: Host) -> CommandResult:  # h0's command runs when Ctrl-C comes; h1's has ended by then
        if host.name == "h0":
            assert h1_done.wait(10)
            PRESS()
            if again:
                threading.Timer(0.8, PRESS).start()
            threading.Event().wait(0.5 if not again else 3600)
        threading.Timer(0.05, h1_done.set).start()  # once this host's result is in
        return CommandResult("sleep", 0, f"{host.name} done\n", "")

    def run(hosts, cmd, opts, timeout, notice=None, progress=None):
        return execute.each(hosts, one, timeout, notice)

    start = time.monotonic()
    rc = exec_cmd.command(hosts(2), "sleep", ConnectOptions(), True, 30.0, run=run)
    out, err = capsys.readouterr()
    rows = {r["host"]: r for r in json.loads(out)["hosts"]}
    assert rc == 130 and time.monotonic() - start < 5
    said = err.splitlines()
    assert said[0] == ("Ctrl-C: no host starts now; waiting for h0 to end the step under way (a command ends by "
                       "itself or at its --timeout of 30s); Ctrl-C again to stop waiting")
    assert rows["h1"]["ok"] and rows["h1"]["stdout"] == "h1 done\n"
    if again:
        assert said[1] == "Ctrl-C again: stopped waiting for h0; the host ends its command at its --timeout of 30s"
        assert rows["h0"]["error"] == ("h0: interrupted while its command ran; the host ends it at its --timeout of "
                                       "30s")
    else:
        assert rows["h0"]["ok"] and rows["h0"]["stdout"] == "h0 done\n"
    # before: "each host's row above", where --json printed no row
    assert said[-1] == ("interrupted: no host was started after Ctrl-C; each host's entry in the JSON on stdout says "
                        "where it is")
