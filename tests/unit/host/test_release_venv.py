"""Which venv a release serves from (venvs.release_venv): the one its kept unit's ExecStart names, a playbook's
serve.venv too. Found by review (h-adv15, stop 54): `inv patch`, `inv audit`, `inv bench` and the rollback to
before fleet took the inventory's venv (or a `packages:` one) while the unit ran a serve.venv, so `inv patch apply`
wrote into a venv nothing served from and recorded a release a later rollback refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fleet.host import venvs
from fleet.host.releases import Release, ReleaseDamaged
from fleet.inventory import Host

HOST = Host(name="h1", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=Path("x.yaml"))
UNIT_PATH = "/etc/systemd/system/sglang.service"
UNIT = b"[Service]\nUser=root\nExecStart=/opt/other-env/bin/python -m sglang.launch_server --port 30000\n"


class Store:
    """The release store's kept copies, as ReleaseStore.file answers them."""

    def __init__(self, copies: dict[str, bytes]):
        self.copies = copies
        self.asked: list[str] = []

    def file(self, release: Release, path: str) -> bytes | None:
        self.asked.append(path)
        return self.copies.get(path)


def release(files: dict[str, bytes], **facts: object) -> Release:
    return Release(id="r1", host="h1", playbook="p", playbook_sha256="x", created="t", status="ok", rung="a",
                   facts=dict(facts), files={p: {"sha256": hashlib.sha256(d).hexdigest(), "mode": "0o644"}
                                             for p, d in files.items()})


def test_the_venv_is_the_one_the_kept_unit_runs():
    store = Store({UNIT_PATH: UNIT})
    assert venvs.release_venv(store, HOST, release({UNIT_PATH: UNIT})).venv == "/opt/other-env"  # was /root/ml-env


def test_a_damaged_or_missing_unit_copy_is_refused_not_guessed():
    for copies in ({UNIT_PATH: UNIT.replace(b"other", b"evil!")}, {}):
        with pytest.raises(ReleaseDamaged, match="sglang.service is missing or damaged"):
            venvs.release_venv(Store(copies), HOST, release({UNIT_PATH: UNIT}))


def test_without_a_unit_it_is_the_packages_venv_else_the_inventorys():
    own = "/var/lib/fleet/venvs/" + "a" * 16
    store = Store({})
    assert venvs.release_venv(store, HOST, release({}, venv=own)).venv == own
    assert venvs.release_venv(store, HOST, release({})).venv == "/root/ml-env"
    assert store.asked == []  # no round trip where there is no unit to read

