"""`inv probe --p2p-check` says where it stands while the check runs (issue 46, finding 5; h-new21's hour): the check
copies a buffer between each pair of GPUs, up to 2 min a host (a broken P2P path hangs until timeout(1) ends it),
and nothing at all was said until the table: 42 s of silence on a sandbox host whose check took 40 s."""

from __future__ import annotations

import pytest
from test_exec_progress import hosts
from ticking import Said

from fleet.host import probe_run
from fleet.host.facts import HostFacts
from fleet.ssh.connect import ConnectOptions


@pytest.fixture
def slow_probe(monkeypatch):
    said = Said()

    def probe_host(host, opts, p2p_check=False):
        if host.name == "h1":  # the slow host: its check runs until where the probe stands was said
            assert said.ticked.wait(10), said
        return HostFacts.failed(host.name, host.address, "x")

    monkeypatch.setattr(probe_run, "probe_host", probe_host)
    return said


def test_the_p2p_check_says_its_budget_and_where_it_stands(slow_probe):
    probe_run.probe_hosts(hosts(2), ConnectOptions(), save=False, p2p_check=True, progress=slow_probe)
    said = [str(m) for m in slow_probe]
    assert said[0] == "P2P data check: a buffer copied between each pair of GPUs of 2 hosts (budget 195s)"
    assert any(m.startswith("phase probe and P2P data check: ") and "of 195s budget; 1 of 2 hosts done, still "
               "running: h1" in m for m in said), said


def test_a_probe_without_the_check_says_nothing(monkeypatch):
    said = Said()
    monkeypatch.setattr(probe_run, "probe_host", lambda h, o, p2p_check=False: HostFacts.failed(h.name, h.address, "x"))
    probe_run.probe_hosts(hosts(2), ConnectOptions(), save=False, progress=said)
    assert said == []
