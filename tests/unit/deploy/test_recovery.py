"""What `inv status` says about a dead run's leftovers (fleet.deploy.recovery.parse_probe) and when a lock's owner is
provably dead (fleet.host.lock.dead_owner): pure, no host."""

from __future__ import annotations

import json
import os
import socket
import time

from fleet.deploy import recovery
from fleet.host import lock as hostlock


def _owner(**changes) -> dict:
    return {**hostlock._me("deploy x"), "owner": "me@" + socket.gethostname(), **changes}


def test_a_lock_is_provably_dead_only_on_this_machine_with_its_pid_gone_or_reused():
    assert hostlock.dead_owner(_owner()) is None  # this very process
    assert "no longer running" in hostlock.dead_owner(_owner(pid=2 ** 22 + 7))
    assert "now another process" in hostlock.dead_owner(_owner(pid_start=1))
    assert hostlock.dead_owner(_owner(machine="elsewhere", pid=2 ** 22 + 7)) is None
    if hostlock._read_id("/etc/machine-id"):  # the same host name on another machine is not this machine
        assert hostlock.dead_owner(_owner(machine_id="0" * 32, pid=2 ** 22 + 7)) is None
    if hostlock._read_id("/proc/sys/kernel/random/boot_id"):  # no process outlives a reboot
        assert "has rebooted since" in hostlock.dead_owner(_owner(boot_id="an-earlier-boot"))
    assert hostlock.dead_owner(_owner(machine_id=None, boot_id=None, pid=2 ** 22 + 7)) is None  # maybe a clone
    assert hostlock.dead_owner(None) is None and hostlock.dead_owner(_owner(pid="12")) is None


def test_status_probe_output_names_an_interrupted_release_and_what_the_next_deploy_does():
    dead = json.dumps(_owner(pid=2 ** 22 + 7))
    text = (f'release 20261130T101010Z-abcd {{"t": 1, "step": "installed", "rung": "plain"}}\n'
            f"lock {dead}\npatch-run 20261130T101011Z-ef0123\n")
    line = recovery.parse_probe(text)
    assert line.startswith("lock left by a dead run (pid 4194311 is no longer running")
    assert "release 20261130T101010Z-abcd was interrupted after step installed" in line
    assert "patch run 20261130T101011Z-ef0123 was interrupted half-way" in line


def test_status_probe_output_while_a_live_run_holds_the_lock_says_in_progress():
    text = f'release 20261130T101010Z-abcd {{"step": "stop"}}\nlock {json.dumps(_owner(epoch=int(time.time())))}\n'
    line = recovery.parse_probe(text)
    assert line.startswith(f"locked: held by me@{socket.gethostname()} pid {os.getpid()}")
    assert "deploy 20261130T101010Z-abcd in progress (at step stop)" in line and "STALE" not in line


def test_a_clean_host_has_nothing_to_say():
    assert recovery.parse_probe("lock \n") is None and recovery.parse_probe("") is None
