"""service.write_atomic on a real host over SFTP: what a unit, env or release file write guarantees."""

from __future__ import annotations

import pytest
from fleetcli import sh

from fleet import service
from fleet.connect import open_connection

DIR = "/root/fleet-write-test"


@pytest.fixture
def conn(sandbox, sandbox_inventory):
    sh(sandbox_inventory, "sbx4", f"rm -rf {DIR} && mkdir -p {DIR}")
    c = open_connection(sandbox_inventory.hosts["sbx4"])
    yield c
    c.close()
    sh(sandbox_inventory, "sbx4", f"rm -rf {DIR}")


def test_the_owner_is_kept_the_mode_is_exact_and_no_temp_file_is_left(conn, sandbox_inventory):
    sh(sandbox_inventory, "sbx4", f"echo old > {DIR}/env && chown nobody:nogroup {DIR}/env && chmod 0644 {DIR}/env")
    service.write_atomic(conn, f"{DIR}/env", b"KEY=secret\n", 0o600)
    assert sh(sandbox_inventory, "sbx4", f"stat -c '%U:%G %a' {DIR}/env").strip() == "nobody:nogroup 600"
    assert sh(sandbox_inventory, "sbx4", f"cat {DIR}/env") == "KEY=secret\n"
    service.write_atomic(conn, f"{DIR}/new", b"x", 0o640)  # a new file: root's, with the mode asked for
    assert sh(sandbox_inventory, "sbx4", f"stat -c '%U %a' {DIR}/new").strip() == "root 640"
    assert sh(sandbox_inventory, "sbx4", f"ls -A {DIR}").split() == ["env", "new"]


def test_a_symlinked_target_is_refused_and_left_as_it_is(conn, sandbox_inventory):
    sh(sandbox_inventory, "sbx4", f"echo real > {DIR}/real && ln -s {DIR}/real {DIR}/link")
    with pytest.raises(service.ServiceError, match=r"it is a symlink; fleet replaces only plain files"):
        service.write_atomic(conn, f"{DIR}/link", b"changed", 0o600)
    assert sh(sandbox_inventory, "sbx4", f"readlink {DIR}/link; cat {DIR}/real") == f"{DIR}/real\nreal\n"
    assert sh(sandbox_inventory, "sbx4", f"ls -A {DIR}").split() == ["link", "real"]
