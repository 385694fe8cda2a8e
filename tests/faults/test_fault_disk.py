"""A full disk (a small tmpfs mounted on the host, filled up) at each place fleet writes: the unit, the env
file, the patch engine's backups, the lock and release store. Each: a clear error, no truncated file and no
temp file left, the previous release still serving."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from faultkit import (
    ENV,
    PATCHABLE,
    PATCHED,
    PLAIN,
    UNIT,
    current,
    deploy_ok,
    managed_digest,
    rung,
    serving,
    temp_files,
)
from fleetcli import inv_json, llama_playbook, sh

HOST = "sbx0"  # SM120: the patched rung writes files there


@contextmanager
def full(inventory, folder: str):
    """`folder` on a small tmpfs holding a copy of what was there, then filled to the last byte."""
    sh(inventory, HOST, f"rm -rf /tmp/keep && mkdir -p {folder} && cp -a {folder} /tmp/keep && "
                        f"mount -t tmpfs -o size=$(( $(du -sk /tmp/keep | cut -f1) * 2 + 256 ))k,mode=0700 tmpfs "
                        f"{folder} && cp -a /tmp/keep/. {folder}/ && "
                        f"(dd if=/dev/zero of={folder}/.filler bs=4k 2>/dev/null; true) && df -k {folder}")
    assert sh(inventory, HOST, f"df -Pk {folder} | tail -n 1").split()[3] == "0"
    try:
        yield
    finally:
        sh(inventory, HOST, f"umount {folder}")


def _watched(inventory) -> dict[str, str]:
    digest = managed_digest(inventory, HOST)
    return {k: v for k, v in digest.items() if k in (UNIT, ENV, *PATCHABLE) or k.startswith("current")}


@pytest.mark.parametrize("path", [UNIT, ENV], ids=["unit", "env file"])
def test_a_full_disk_when_the_unit_or_env_file_is_written(path, sandbox, sandbox_inventory, tmp_path):
    kind = "unit" if path == UNIT else "env"
    base = deploy_ok(sandbox, HOST, llama_playbook(tmp_path, PLAIN, name=f"llama-disk-base-{kind}"))
    other = llama_playbook(tmp_path, rung(f"other-{kind}", NEW="x" * 64), name=f"llama-disk-{kind}")
    before = _watched(sandbox_inventory)
    with full(sandbox_inventory, path.rsplit("/", 1)[0]):
        rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(other))
        assert temp_files(sandbox_inventory, HOST) == []
        after = _watched(sandbox_inventory)
    assert rc == 1 and data["status"] == "rolled_back", err[-3000:]
    (attempt,) = data["attempts"]
    assert attempt["outcome"] == "INSTALL_FAILED" and f"writing {path}" in attempt["evidence"], attempt
    assert "no space left on device" in attempt["evidence"] and "the old file is untouched" in attempt["evidence"]
    assert after == before  # what was written before the failing file was put back; that file never changed
    assert current(sandbox_inventory, HOST) == base and serving(sandbox_inventory, HOST)


def test_a_full_disk_when_a_patch_backup_is_written(sandbox, sandbox_inventory, tmp_path):
    base = deploy_ok(sandbox, HOST, llama_playbook(tmp_path, PLAIN, name="llama-disk-base2"))
    patched = llama_playbook(tmp_path, PATCHED, name="llama-disk-patched")
    before = _watched(sandbox_inventory)
    with full(sandbox_inventory, "/var/lib/fleet/backups"):
        rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(patched))
        assert temp_files(sandbox_inventory, HOST) == []
    assert rc == 1 and data["status"] == "rolled_back", err[-3000:]
    (attempt,) = data["attempts"]
    assert attempt["outcome"] == "PREFLIGHT" and "cannot back up to /var/lib/fleet/backups" in attempt["evidence"]
    assert "No space left on device" in attempt["evidence"] and "nothing written" in attempt["evidence"]
    assert _watched(sandbox_inventory) == before  # no file of the set was patched
    assert current(sandbox_inventory, HOST) == base and serving(sandbox_inventory, HOST)


def test_a_full_disk_under_the_lock_and_release_store_changes_nothing(sandbox, sandbox_inventory, tmp_path):
    deploy_ok(sandbox, HOST, llama_playbook(tmp_path, PLAIN, name="llama-disk-base3"))
    other = llama_playbook(tmp_path, rung("other", O="1"),
                           name="llama-disk-store")
    before = managed_digest(sandbox_inventory, HOST)
    with full(sandbox_inventory, "/var/lib/fleet"):
        rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(other))
        assert sh(sandbox_inventory, HOST, "test -e /var/lib/fleet/lock || echo none").strip() == "none"
    assert rc == 1 and data["status"] == "failed"
    assert "cannot take the host lock" in data["error"] and "No space left on device" in data["error"]
    assert managed_digest(sandbox_inventory, HOST) == before and serving(sandbox_inventory, HOST)
