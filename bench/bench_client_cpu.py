"""Where the client's CPU goes for each probed host, step by step (a benchmark, not a test).

The hosts are probed one at a time, so the process's CPU clock (every thread's, paramiko's transport thread
included) can be charged to one step at a time; the figures are medians over the hosts, in ms:

  route        ssh_config looked up and the sandbox guard's check (address pinned)
  known_hosts  the known_hosts files read (cached by content) and this host's keys found
  connection   the Fabric Connection object with its auth strategy and host-key policy
  handshake    TCP, key exchange, host-key check and public-key authentication (conn.open)
  command      the probe script over one exec channel, its output read
  parse        the output parsed into HostFacts
  save         the facts written (atomically) to the state folder
  close        the channel and transport shut

beside the floor's steps: a bare paramiko SSHClient (load_host_keys, connect, exec_command of the same
script, read, close), measured the same way on the same hosts.

usage (root): .venv/bin/python bench/bench_client_cpu.py [--hosts 16] [--keep]
It uses the "bench" sandbox instance (172.30.73.0/24), so it never replaces the demo or test fleets.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ["FLEET_SANDBOX_ONLY"] = "1"
os.environ["FLEET_SANDBOX_INSTANCE"] = "bench"

import paramiko  # noqa: E402

from fleet import inventory  # noqa: E402
from fleet.host import (
    probe,  # noqa: E402
    probe_run,  # noqa: E402
)
from fleet.ssh import (
    connect,  # noqa: E402
    remote,  # noqa: E402
)
from fleet.ssh import known_hosts as knownhosts  # noqa: E402
from fleet.ssh.connect import ConnectOptions  # noqa: E402
from sandbox.config import config  # noqa: E402
from sandbox.hosts import Sandbox  # noqa: E402

PROFILE = "rtx-pro-6000-x8-proxmox"
STEPS = ("route", "known_hosts", "connection", "handshake", "command", "parse", "save", "close")
FLOOR_STEPS = ("load_host_keys", "handshake", "command", "close")


class Clock:
    """Process CPU ms charged to named steps, one host at a time."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {}

    def __call__(self, step: str, fn: Callable[[], Any]) -> Any:
        start = time.process_time()
        value = fn()
        self.ms.setdefault(step, []).append((time.process_time() - start) * 1000)
        return value


def fleet_host(host: inventory.Host, opts: ConnectOptions, clock: Clock) -> None:
    """The steps of probe_run.probe_host and connect.open_connection, one at a time."""
    target, hops = clock("route", lambda: connect.route(host))
    assert not hops
    pins = clock("route", lambda: connect._pins(host, target, hops))
    files, _ = connect.known_hosts_files(host, target)
    clock("known_hosts", lambda: knownhosts.load_all(files).keys_for(target.key_name))
    conn = clock("connection", lambda: connect._connection(host, target, "target", opts, None, pins.get(target)))
    clock("handshake", conn.open)
    res = clock("command", lambda: remote.run(conn, host, probe.command(host.venv, host.unit), timeout=60))
    facts = clock("parse", lambda: probe.parse(res.stdout, host.name, host.address))
    assert facts.ok and facts.gpus, facts.error
    clock("save", lambda: probe_run.save_facts(facts))
    clock("close", conn.close)


def floor_host(host: inventory.Host, known_hosts: str, key: str, script: str, clock: Clock) -> None:
    client = paramiko.SSHClient()
    clock("load_host_keys", lambda: client.load_host_keys(known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    clock("handshake", lambda: client.connect(host.address, username="root", key_filename=key, allow_agent=False,
                                              look_for_keys=False, timeout=30))

    def command() -> None:
        _, out, _ = client.exec_command(script)
        out.read()
        out.channel.recv_exit_status()

    clock("command", command)
    clock("close", client.close)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--keep", action="store_true", help="leave the bench fleet up afterwards")
    args = ap.parse_args()
    sb = Sandbox(config("bench"), log=lambda m: None)
    sb.up(args.hosts, [PROFILE])
    os.environ["FLEET_STATE_DIR"] = tempfile.mkdtemp(prefix="fleet-bench-state-")
    try:
        path = sb.cfg.inventory_path
        hosts = inventory.load(path).select(default_file=path)
        script = probe.command(hosts[0].venv, hosts[0].unit)
        fleet, floor = Clock(), Clock()
        opts = ConnectOptions()
        for host in hosts:  # the first host of each pays one-off costs (imports, first use): left out
            fleet_host(host, opts, Clock() if host is hosts[0] else fleet)
            floor_host(host, str(sb.cfg.known_hosts), str(sb.cfg.identity_file), script,
                       Clock() if host is hosts[0] else floor)
    finally:
        if not args.keep:
            sb.down()
    med = {name: {s: statistics.median(v) for s, v in c.ms.items()} for name, c in (("fleet", fleet),
                                                                                  ("floor", floor))}
    print(f"client CPU per host, ms, median of {args.hosts - 1} hosts probed one at a time ({PROFILE})")
    for step in STEPS:
        print(f"  fleet {step:<14} {med['fleet'][step]:6.2f}")
    for step in FLOOR_STEPS:
        print(f"  floor {step:<14} {med['floor'][step]:6.2f}")
    total = {name: sum(m.values()) for name, m in med.items()}
    print(f"  fleet total {total['fleet']:.2f} ms, floor total {total['floor']:.2f} ms "
          f"({total['fleet'] / total['floor']:.2f}x)")


if __name__ == "__main__":
    main()
