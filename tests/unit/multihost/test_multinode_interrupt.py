"""Ctrl-C in a multi-node deploy or rollback (a playbook's `nodes:`) is answered as a deploy of several hosts
answers it (issue 46, finding 4; newcomer h-new17). The deployment ran on the main thread: a Ctrl-C ended it
wherever it was, both nodes left stopped, a bare `interrupted`, no node's line. Now its one run goes on a worker
thread (fleet.multihost.together): the first Ctrl-C is said at once naming every node and the run ends on its own
(one that has changed no node yet stops before it does), a second stops waiting; every node then has its line.
The interrupt is a real one (_thread.interrupt_main, as SIGINT reaches the main thread)."""

from __future__ import annotations

import _thread
import signal
import threading
import time
from pathlib import Path

import pytest

from fleet import parallel, playbook
from fleet.deploy.results import DeployResult
from fleet.host.releases import Release
from fleet.inventory import Host
from fleet.multihost import multinode, rolling
from fleet.multihost.together import together
from fleet.outcomes import DeployStatus
from fleet.ssh.connect import ConnectOptions

BOOK = "name: two\nmodel: {path: /models/m}\nnodes: {count: 2, dist_port: 5757}\nflags: {tp-size: 4}\n" \
       "ladder:\n  - name: base\n"


def hosts(n: int) -> list[Host]:
    return [Host(name=f"n{i}", address=f"10.0.0.{i + 1}", port=None, user=None, become=False, identity_file=None,
                 known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                 source=Path("hosts.yaml")) for i in range(n)]


def test_ctrl_c_is_said_at_once_naming_every_node_and_the_run_ends_on_its_own():
    heard: list[str] = []
    ended = threading.Event()

    def run() -> list[DeployResult]:
        _thread.interrupt_main()
        time.sleep(0.5)  # the step under way, ended after the Ctrl-C was said
        ended.set()
        return [DeployResult(h.name, DeployStatus.OK, release="r-new") for h in hosts(2)]

    with pytest.raises(rolling.DeployInterrupted) as stop:
        together(hosts(2), run, heard.append)
    assert ended.is_set()  # waited for: the nodes were not left mid-step
    assert heard == ["Ctrl-C: no host starts now; waiting for n0, n1 to end the step under way "
                     f"({parallel.DEPLOY_ENDS}); Ctrl-C again to stop waiting"]
    assert [(r.host, r.status, r.release) for r in stop.value.results] == [("n0", DeployStatus.OK, "r-new"),
                                                                           ("n1", DeployStatus.OK, "r-new")]


def test_a_second_ctrl_c_stops_waiting_and_every_node_says_it_was_left_mid_step():
    heard: list[str] = []

    def run() -> list[DeployResult]:
        _thread.interrupt_main()
        # a real signal: it wakes the main thread's wait, as the operator's second Ctrl-C does
        threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
        time.sleep(3)
        return []

    with pytest.raises(rolling.DeployInterrupted) as stop:
        together(hosts(2), run, heard.append, "rolling back")
    assert heard[-1] == f"Ctrl-C again: stopped waiting for n0, n1; {parallel.DEPLOY_LEFT}"
    assert [(r.host, r.status) for r in stop.value.results] == [("n0", DeployStatus.FAILED),
                                                                ("n1", DeployStatus.FAILED)]
    assert all("interrupted while rolling back" in (r.error or "") for r in stop.value.results)


def test_without_ctrl_c_every_nodes_result_is_the_runs():
    done = [DeployResult("n0", DeployStatus.OK), DeployResult("n1", DeployStatus.OK)]
    assert together(hosts(2), lambda: done, None) == done


def test_a_deployment_that_has_changed_no_node_stops_before_it_does(tmp_path, monkeypatch):
    path = tmp_path / "two.yaml"
    path.write_text(BOOK)
    said: list[str] = []
    m = multinode.MultiNode(hosts(2), playbook.load(path), path, ConnectOptions(),
                            lambda h: lambda msg: said.append(f"{h.name} {msg}"), {})
    for n in m.nodes:
        n.previous = Release(id="r-b", host=n.host.name, playbook="two", playbook_sha256="0" * 64, created="then",
                             status="ok", config={"rung": "base"})
    assert not m._stopping()  # no Ctrl-C: it goes on
    monkeypatch.setattr(parallel, "stopping", lambda: True)
    assert m._stopping()
    assert said == ["n0 Ctrl-C: stopped before any change", "n1 Ctrl-C: stopped before any change"]
    assert [(n.result.status, n.result.release, n.result.error) for n in m.nodes] == [
        (DeployStatus.SKIPPED, "r-b", f"{h}: stopped by Ctrl-C before any change; it runs what it ran before")
        for h in ("n0", "n1")]
