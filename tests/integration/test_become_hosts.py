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
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import run

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
        assert "sudo -k -S -p  -- sh -c ps -eo args" in table and PASSWORD not in table
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
