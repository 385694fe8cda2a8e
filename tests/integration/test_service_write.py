"""service.write_atomic and read_file on a real host (fleet/host/programs/write.sh over one exec channel, the data on
stdin): what a unit, env or release file write guarantees, as root and as a sudo user."""

from __future__ import annotations

import dataclasses

import pytest
from fleetcli import sh

from fleet.host import service
from fleet.ssh.connect import open_connection

DIR = "/root/fleet-write-test"


@pytest.fixture
def conn(sandbox, sandbox_inventory):
    sh(sandbox_inventory, "sbx4", f"rm -rf {DIR} && mkdir -p {DIR}")
    c = open_connection(sandbox_inventory.hosts["sbx4"])
    yield c, sandbox_inventory.hosts["sbx4"]
    c.close()
    sh(sandbox_inventory, "sbx4", f"rm -rf {DIR}")


def test_the_owner_is_kept_the_mode_is_exact_and_no_temp_file_is_left(conn, sandbox_inventory):
    conn, host = conn
    sh(sandbox_inventory, "sbx4", f"echo old > {DIR}/env && chown nobody:nogroup {DIR}/env && chmod 0644 {DIR}/env")
    service.write_atomic(conn, host, f"{DIR}/env", b"KEY=secret\n", 0o600)
    assert sh(sandbox_inventory, "sbx4", f"stat -c '%U:%G %a' {DIR}/env").strip() == "nobody:nogroup 600"
    assert sh(sandbox_inventory, "sbx4", f"cat {DIR}/env") == "KEY=secret\n"
    service.write_atomic(conn, host, f"{DIR}/new", b"x", 0o640)  # new: root's, the mode asked for
    assert sh(sandbox_inventory, "sbx4", f"stat -c '%U %a' {DIR}/new").strip() == "root 640"
    assert sh(sandbox_inventory, "sbx4", f"ls -A {DIR}").split() == ["env", "new"]


def test_a_symlinked_target_is_refused_and_left_as_it_is(conn, sandbox_inventory):
    conn, host = conn
    sh(sandbox_inventory, "sbx4", f"echo real > {DIR}/real && ln -s {DIR}/real {DIR}/link")
    with pytest.raises(service.ServiceError, match=r"it is a symlink; fleet replaces only plain files"):
        service.write_atomic(conn, host, f"{DIR}/link", b"changed", 0o600)
    assert sh(sandbox_inventory, "sbx4", f"readlink {DIR}/link; cat {DIR}/real") == f"{DIR}/real\nreal\n"
    assert sh(sandbox_inventory, "sbx4", f"ls -A {DIR}").split() == ["link", "real"]


def test_bytes_round_trip_exactly_and_a_missing_file_reads_as_none(conn):
    conn, host = conn
    data = bytes(range(256)) * 4096 + b"\r\n\x00no newline at the end"  # 1 MiB of every byte value
    service.write_atomic(conn, host, f"{DIR}/blob", data, 0o600)
    assert service.read_file(conn, host, f"{DIR}/blob") == data
    service.write_atomic(conn, host, f"{DIR}/empty", b"", 0o600)
    assert service.read_file(conn, host, f"{DIR}/empty") == b""
    assert service.read_file(conn, host, f"{DIR}/nothing-here") is None


def test_a_write_that_cannot_happen_says_why_and_leaves_no_temp_file(conn, sandbox_inventory):
    conn, host = conn
    with pytest.raises(service.ServiceError, match=r"writing /root/fleet-write-test/no/such/env: cannot create a "
                                                   r"temporary file in /root/fleet-write-test/no/such; the old file"):
        service.write_atomic(conn, host, f"{DIR}/no/such/env", b"x", 0o600)
    sh(sandbox_inventory, "sbx4", f"mkdir {DIR}/dir")
    with pytest.raises(service.ServiceError, match=r"it is not a plain file; nothing was written"):
        service.write_atomic(conn, host, f"{DIR}/dir", b"x", 0o600)
    with pytest.raises(service.ServiceError, match=r"reading /root/fleet-write-test/dir: cat: .*Is a directory"):
        service.read_file(conn, host, f"{DIR}/dir")
    assert sh(sandbox_inventory, "sbx4", f"ls -A {DIR}").split() == ["dir"]


def test_a_sudo_user_reads_and_writes_root_files_as_root(sandbox_inventory):
    """user fleet (NOPASSWD sudo in the sandbox image) with become: files come out root's, as root would
    write them, in a folder the login user cannot even enter."""
    host = dataclasses.replace(sandbox_inventory.hosts["sbx4"], user="fleet", become=True)
    sh(sandbox_inventory, "sbx4", f"rm -rf {DIR} && mkdir -m 0700 {DIR}")
    c = open_connection(host)
    try:
        service.write_atomic(c, host, f"{DIR}/env", b"KEY=secret\n", 0o600)
        assert service.read_file(c, host, f"{DIR}/env") == b"KEY=secret\n"
        assert sh(sandbox_inventory, "sbx4", f"stat -c '%U:%G %a' {DIR}/env").strip() == "root:root 600"
        plain = dataclasses.replace(host, become=False)
        c2 = open_connection(plain)
        try:
            with pytest.raises(service.ServiceError, match=r"Permission denied"):
                service.read_file(c2, plain, f"{DIR}/env")
        finally:
            c2.close()
    finally:
        c.close()
        sh(sandbox_inventory, "sbx4", f"rm -rf {DIR}")
