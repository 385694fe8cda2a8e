"""Where a connection goes once ssh_config is applied, and the guard's verdict on it (no network I/O)."""

from __future__ import annotations

import dataclasses
import errno
import socket
from pathlib import Path

import pytest
from paramiko import AuthenticationException, SSHException
from paramiko.ssh_exception import NoValidConnectionsError

from fleet.errors import GuardError, InputError
from fleet.inventory import Host
from fleet.ssh import connect, guard
from fleet.ssh.connect import check_guard, route

BASE = Host(name="h", address="vm1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x.yaml"))


def with_config(tmp_path, text, **changes) -> Host:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(text)
    return dataclasses.replace(BASE, ssh_config=str(cfg), **changes)


def test_ssh_config_supplies_hostname_user_port_identity_and_jumps(tmp_path):
    host = with_config(tmp_path, """
Host vm1
  HostName 172.30.77.20
  User ops
  Port 2200
  IdentityFile ~/.ssh/vm_key
  ProxyJump admin@pve1:2222,pve2
Host pve1
  HostName 172.30.77.2
Host pve2
  HostName 172.30.77.3
  User jump
""")
    target, hops = route(host)
    assert (target.hostname, target.user, target.port) == ("172.30.77.20", "ops", 2200)
    assert target.identity_files[0].endswith("/.ssh/vm_key") and "~" not in target.identity_files[0]
    assert [(h.hostname, h.user, h.port) for h in hops] == [("172.30.77.2", "admin", 2222), ("172.30.77.3", "jump", 22)]


def test_the_inventory_wins_over_ssh_config(tmp_path):
    host = with_config(tmp_path, "Host vm1\n  User ops\n  Port 2200\n  ProxyJump gw\n", user="root", port=22,
                       proxy_jump="none")
    target, hops = route(host)
    assert (target.user, target.port, hops) == ("root", 22, [])


def test_a_missing_ssh_config_named_by_the_inventory_is_bad_input(tmp_path):
    with pytest.raises(InputError, match=r"x.yaml: hosts.h.ssh_config: no such file"):
        route(dataclasses.replace(BASE, ssh_config=str(tmp_path / "nope")))


@pytest.mark.parametrize("ip,ok", [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("172.30.77.10", True),
                                   ("172.30.79.200", True), ("172.30.80.1", False), ("10.1.230.174", False),
                                   ("8.8.8.8", False), ("192.168.1.1", False)])
def test_guard_allows_only_loopback_and_sandbox_subnets(ip, ok):
    assert guard.allowed(ip) is ok


def test_guard_is_off_unless_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "0")
    check_guard(dataclasses.replace(BASE, address="10.1.230.174"))
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "1")
    with pytest.raises(GuardError, match=r"h: 10.1.230.174 \(10.1.230.174\) refused"):
        check_guard(dataclasses.replace(BASE, address="10.1.230.174"))


def test_guard_checks_every_hop_after_ssh_config(tmp_path):
    host = with_config(tmp_path, "Host vm1\n  HostName 172.30.77.20\n  ProxyJump ok,bad\n"
                                 "Host ok\n  HostName 127.0.0.1\nHost bad\n  HostName 10.1.230.174\n")
    with pytest.raises(GuardError, match=r"ProxyJump hop 2 10.1.230.174"):
        check_guard(host)


@pytest.mark.parametrize("exc,silent", [
    (NoValidConnectionsError({("172.30.73.14", 22): ConnectionRefusedError(111, "refused")}), True),
    (TimeoutError("timed out"), True),
    (ConnectionResetError(104, "reset"), True),
    (OSError(errno.EHOSTUNREACH, "No route to host"), True),  # a host gone from the link (sandbox.cut): no TCP
    (OSError(errno.ENETUNREACH, "Network is unreachable"), False),  # this side has no route: no host to reset
    (OSError(errno.EACCES, "Permission denied"), False),
    (SSHException("Error reading SSH protocol banner"), True),  # TCP accepted, sshd never spoke: a wedged host
    (SSHException("No existing session"), True),  # the same, silent past the connect timeout
    (socket.gaierror(-2, "Name or service not known"), False),  # a name, not a host, failed
    (AuthenticationException("Authentication failed."), False),  # it answered and refused us
    (SSHException("Server 'vm1' not found in known_hosts"), False),
    (ValueError("no"), False),
])
def test_only_a_host_that_gives_no_answer_is_silent(exc, silent):
    """What `inv recover` may answer with a VM reset: silence, never a refusal (a reset would not change it)."""
    assert connect._silent(exc) is silent
