"""A probe says where it stands while a host is slow to answer, without --p2p-check too (issue 46, finding 5;
h-new24's hour): a host whose nvidia-smi hangs (a GPU fallen off the bus does that) holds the probe up to its
60 s limit; `inv probe` printed nothing for 61 s, then `probe failed`, and a deploy said `probing` and nothing else."""

from __future__ import annotations

from fakesession import HOST
from test_exec_progress import hosts
from ticking import Said

from fleet.host import probe_run
from fleet.host.facts import HostFacts
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import CommandResult


def test_a_probe_waiting_on_a_slow_host_says_where_it_stands(monkeypatch):
    said = Said()

    def probe_host(host, opts, p2p_check=False):
        if host.name == "h1":  # the slow host answers once where the probe stands was said
            assert said.ticked.wait(10), said
        return HostFacts.failed(host.name, host.address, "x")

    monkeypatch.setattr(probe_run, "probe_host", probe_host)
    probe_run.probe_hosts(hosts(2), ConnectOptions(), save=False, progress=said)
    assert any(str(m).startswith("phase probe: ") and "of 60s budget; 1 of 2 hosts done, still running: h1" in m
               for m in said), said


def test_one_hosts_probe_over_its_connection_says_where_it_stands(monkeypatch):
    said = Said()

    def run(conn, host, command, timeout):
        assert said.ticked.wait(10), said
        return CommandResult(command, 1, "", "")

    monkeypatch.setattr(probe_run, "run", run)
    probe_run.probe_on(None, HOST, said)  # type: ignore[arg-type]
    assert any(str(m).startswith("phase probe: ") and m.endswith("of 60s budget") for m in said), said
