"""Ctrl-C during `inv bench` (fleet.multihost.bench.bench_hosts): the first is answered at once (no host starts,
those measuring end), then every host's outcome as it stood, for the CLI to show before exit 130. The newcomer's
`inv bench -H sbx1` and Ctrl-C while it measured said 'waiting for sbx1 to end the step under way', waited for the
benchmark, then threw away what it measured: a bare 'interrupted', exit 130, no line for the host (issue 46
finding 4's 'no summary of what state each host is in'). The interrupt is a real one (_thread.interrupt_main)."""

from __future__ import annotations

import _thread
import threading
import time
from pathlib import Path

import pytest

from fleet import parallel
from fleet.inventory import Host
from fleet.multihost import bench
from fleet.ssh.connect import ConnectOptions


def _host(name: str) -> Host:
    return Host(name=name, address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                source=Path("hosts.yaml"))


def test_a_ctrl_c_while_measuring_ends_with_what_each_host_measured(monkeypatch):
    measuring = threading.Barrier(3)

    def bench_host(host, book, path, opts, hooks=None, say=None):
        measuring.wait(timeout=5)
        deadline = time.monotonic() + 10  # each host measures until the Ctrl-C is taken (the load can delay it)
        while not parallel.stopping() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05 if host.name == "h0" else 0.1)
        if host.name == "h1":
            raise bench.FleetError("h1: the benchmark failed: connection refused")
        return bench.BenchOutcome(host.name, True, "20261206T004552Z-56ba", "fast")

    monkeypatch.setattr(bench, "bench_host", bench_host)
    threading.Timer(0, lambda: (measuring.wait(timeout=5), time.sleep(0.05), _thread.interrupt_main())).start()
    with pytest.raises(bench.BenchInterrupted) as stop:
        bench.bench_hosts([_host("h0"), _host("h1")], "glm5-nvfp4", ConnectOptions())
    assert [(r.host, r.ok, r.release, r.error) for r in stop.value.results] == [
        ("h0", True, "20261206T004552Z-56ba", None),
        ("h1", False, None, "h1: the benchmark failed: connection refused")]


def test_the_outcomes_of_hosts_cut_or_never_started_say_so():
    hosts = [_host("h0"), _host("h1"), _host("h2")]
    ended = parallel.HostOutcome(hosts[0], True, bench.BenchOutcome("h0", True, "r1", "fast"), None, 1.0)
    said = bench.interrupted([ended, None, None], hosts, {"h0", "h1"})
    assert [(r.host, r.ok, r.error) for r in said] == [
        ("h0", True, None),
        ("h1", False, "h1: interrupted while benchmarking (the load ends on the host at its budget; the server is "
                      "untouched)"),
        ("h2", False, "h2: not started: interrupted")]


def test_a_ctrl_c_while_a_replica_behind_the_router_is_measured_ends_with_every_replicas_outcome(monkeypatch):
    """The review of stop 52: replicas behind a router are measured one at a time on the main thread, which caught
    only FleetError: a Ctrl-C there was a bare `interrupted`, nothing on stdout (docs/cli.md says the same summary
    as for hosts side by side). Each replica goes back into the router whatever happened."""
    back_in: list[str] = []

    def bench_host(host, book, path, opts, hooks=None, say=None):
        if host.name == "h0":
            return bench.BenchOutcome(host.name, True, "20261206T004552Z-56ba", "fast")
        threading.Timer(0.05, _thread.interrupt_main).start()
        deadline = time.monotonic() + 10  # h1 measures until the Ctrl-C is taken
        while not parallel.stopping() and time.monotonic() < deadline:
            time.sleep(0.01)
        return bench.BenchOutcome(host.name, True, "20261206T004552Z-56ba", "fast")

    monkeypatch.setattr(bench, "bench_host", bench_host)
    monkeypatch.setattr(bench.routing, "hooks_for", lambda *a, **k: object())
    monkeypatch.setattr(bench.routing, "back_in", lambda hooks, host, status: back_in.append(host.name))
    with pytest.raises(bench.BenchInterrupted) as stop:
        bench.bench_hosts([_host("h0"), _host("h1"), _host("h2")], "llama-replicas", ConnectOptions())
    assert [(r.host, r.ok, r.error) for r in stop.value.results] == [
        ("h0", True, None), ("h1", True, None), ("h2", False, "h2: not started: interrupted")]
    assert back_in == ["h0", "h1"]
