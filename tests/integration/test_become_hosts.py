"""A non-root login with sudo, against a sandbox host's real sudo and sshd: NOPASSWD (user fleet, from the
sandbox image) and password-required (user ops, made here). Commands and files go through sudo as root; the
password reaches sudo on stdin, and a missing or wrong one is one clear line."""

from __future__ import annotations

import dataclasses
import os

import pytest
import sshutil

from fleet.errors import ConnectError
from fleet.host import service
from fleet.ssh import become
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import run, run_bytes

HOST = "sbx4"
PASSWORD = "pw-" + os.urandom(6).hex() + " with space"
DIR = "/root/fleet-become-test"


@pytest.fixture
def ops(sandbox, sandbox_inventory):
    """User ops on the host, with a password and `ALL=(ALL:ALL) ALL` (sudo asks for the password)."""
    root = sandbox_inventory.hosts[HOST]
    sshutil.make_sudo_user(root, "ops", PASSWORD)
    sshutil.sh(root, f"rm -rf {DIR} && mkdir -m 0700 {DIR}")
    yield dataclasses.replace(root, user="ops", become=True)
    sshutil.sh(root, f"rm -rf {DIR}")


def test_with_the_password_commands_and_files_run_as_root(ops):
    opts = ConnectOptions(become_passwords={ops.name: PASSWORD})
    conn = open_connection(ops, opts)
    try:
        assert run(conn, ops, "id -un; echo $SUDO_USER").stdout.split() == ["root", "ops"]
        service.write_atomic(conn, ops, f"{DIR}/env", b"A=1\n", 0o600)
        assert service.read_file(conn, ops, f"{DIR}/env") == b"A=1\n"
        assert run(conn, ops, f"stat -c '%U:%G %a' {DIR}/env").stdout.strip() == "root:root 600"
        # while a command runs, the process table holds sudo's line but never the password
        table = run(conn, ops, "ps -eo args").stdout
        assert "sudo -k -S -p  -- sh -c IFS= read -r _fleet_line" in table and PASSWORD not in table
    finally:
        conn.close()


def test_without_a_password_every_task_says_how_to_give_one(ops):
    conn = open_connection(ops)
    try:
        with pytest.raises(ConnectError, match=r"sudo wants a password for user ops .*become_password.*"
                                               r"--ask-become-pass"):
            run(conn, ops, "true")
        with pytest.raises(ConnectError, match=r"sudo wants a password"):
            service.read_file(conn, ops, f"{DIR}/env")
    finally:
        conn.close()


def test_a_wrong_password_is_refused_at_connect_in_one_line(ops):
    with pytest.raises(ConnectError, match=r"^sbx4: sudo refused the become password for ops \(wrong password\)$"):
        open_connection(ops, ConnectOptions(become_passwords={ops.name: "not-it"}))


def test_a_nopasswd_user_given_a_password_never_sends_it(sandbox_inventory):
    host = dataclasses.replace(sandbox_inventory.hosts[HOST], user="fleet", become=True)
    conn = open_connection(host, ConnectOptions(become_passwords={host.name: "unused"}))
    try:
        line = run(conn, host, "ps -o args= -p $PPID; id -un").stdout
        assert "sudo -n -- sh -c" in line and line.split()[-1] == "root"
    finally:
        conn.close()


@pytest.fixture
def ops_sh_nopasswd(ops, sandbox_inventory):
    """ops as above plus `NOPASSWD: /bin/sh`: `sudo -n true` wants a password, `sudo -n -- sh -c ...` does not
    (the last matching sudoers rule wins)."""
    root = sandbox_inventory.hosts[HOST]
    sshutil.sh(root, "echo 'ops ALL=(ALL:ALL) NOPASSWD: /bin/sh' >> /etc/sudoers.d/ops")
    yield ops
    sshutil.sh(root, "echo 'ops ALL=(ALL:ALL) ALL' > /etc/sudoers.d/ops")


def _files_holding(root, needle: str, *folders: str) -> list[str]:
    """The files under `folders` that hold `needle` (given to grep on stdin, never in a command line)."""
    conn = open_connection(root)
    try:
        res = run_bytes(conn, root, f"grep -rlF -f - {' '.join(folders)} 2>/dev/null; true",
                        needle.encode() + b"\n", 60)
    finally:
        conn.close()
    return res.stdout.decode().split()


def test_a_sudo_that_never_asks_never_gets_the_password(ops_sh_nopasswd, sandbox_inventory):
    # the shape fleet runs (`sudo ... -- sh -c CMD`) is NOPASSWD here: the password must go nowhere
    ops = ops_sh_nopasswd
    conn = open_connection(ops, ConnectOptions(become_passwords={ops.name: PASSWORD}))
    try:
        assert run(conn, ops, "id -un").stdout.strip() == "root"
        service.write_atomic(conn, ops, f"{DIR}/unit", b"[Unit]\n", 0o644)
        assert service.read_file(conn, ops, f"{DIR}/unit") == b"[Unit]\n"
        assert run(conn, ops, "cat").stdout == ""  # a command reading stdin reads nothing of fleet's
    finally:
        conn.close()
    root = sandbox_inventory.hosts[HOST]
    assert _files_holding(root, PASSWORD.split()[0], DIR, "/etc/systemd/system", "/var/lib/fleet", "/tmp") == []


def test_a_password_in_front_of_a_command_sudo_did_not_ask_for_is_never_read(ops_sh_nopasswd, sandbox_inventory):
    # password mode forced onto a connection whose sudo never asks: the command refuses to start
    ops = ops_sh_nopasswd
    conn = open_connection(ops)
    try:
        become.attach(conn, become.Become(become.Mode.PASSWORD, PASSWORD))
        with pytest.raises(ConnectError, match=r"sudo ran .* without asking for the password"):
            run(conn, ops, f"cat > {DIR}/leak")
        become.attach(conn, become.NONE)
    finally:
        conn.close()
    assert _files_holding(sandbox_inventory.hosts[HOST], PASSWORD.split()[0], DIR) == []
