"""The router's release put back (fleet.multihost.router.RouterHooks.restore) needs no free space: a file as the
release has it is left alone, one this run kept is put back by rename, and only a file with no kept copy is
written. Found by the many-host fault harness (rolling, full at the router's install): the new router's unit
and env were written, the disk filled, and writing the previous ones back failed too: the router stayed stopped
while both replicas served. The host's commands are replaced; the files are a dict."""

from __future__ import annotations

import pytest

from fleet import playbook
from fleet.host.releases import Release
from fleet.host.service import sha256
from fleet.inventory import load as load_inventory
from fleet.multihost import router as routing
from fleet.outcomes import Outcome
from fleet.ssh.connect import ConnectOptions

BOOK = """name: replicas
model: {path: /models/Llama-3.1-8B-Instruct}
serve: {host: 0.0.0.0, port: 30000, api_key: {env: SGLANG_API_KEY}}
ladder:
  - name: plain
router: {host: sbx0, port: 30080}
"""
UNIT, ENV = "/etc/systemd/system/sglang-router.service", "/etc/fleet/sglang-router.env"
OLD = {UNIT: b"[Service]\nExecStart=router --policy round_robin\n", ENV: b"K=1\n"}


@pytest.fixture
def host(tmp_path, monkeypatch):
    """sbx0 whose disk is full: its files (a dict), the copies kept by this run's writes, every write refused."""
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory/hosts.yaml").write_text("hosts:\n  sbx0: {address: 10.0.0.9}\n")
    path = tmp_path / "replicas.yaml"
    path.write_text(BOOK)
    files = {UNIT: b"[Service]\nExecStart=router --policy random\n", ENV: OLD[ENV]}  # the new unit went in
    kept = {UNIT: OLD[UNIT]}  # write.sh kept the unit it replaced
    done: list[str] = []

    def write_atomic(conn, host, p, data, mode, keep=False):
        raise routing.FleetError(f"writing {p}: cat: write error: No space left on device")

    def put_back_kept(conn, host, p, want):
        if p in kept and sha256(kept[p]) == want:
            files[p] = kept.pop(p)
            done.append(f"renamed {p}")
            return True
        return False

    monkeypatch.setattr(routing, "write_atomic", write_atomic)
    monkeypatch.setattr(routing, "put_back_kept", put_back_kept, raising=False)  # raising: the fork point had none
    monkeypatch.setattr(routing, "read_file", lambda conn, host, p: files.get(p))
    monkeypatch.setattr(routing, "sh", lambda conn, host, command, **kw: done.append(command) or "")
    monkeypatch.setattr(routing, "daemon_reload", lambda conn, host: done.append("daemon-reload"))
    monkeypatch.setattr(routing.restore, "restart", lambda conn, host, unit: done.append(f"restart {unit}"))
    monkeypatch.setattr(routing.restore, "verified_copies", lambda store, release: dict(OLD))
    monkeypatch.setattr(routing.RouterHooks, "_ready", lambda self, conn: (Outcome.READY, "2+2= -> 4"))
    hooks = routing.RouterHooks(playbook.load(path), path, load_inventory(tmp_path / "inventory/hosts.yaml")
                                .hosts["sbx0"], ConnectOptions(), {}, lambda h, m: None)
    previous = Release(id="r-prev", host="sbx0", playbook="replicas", playbook_sha256="0" * 64, created="then",
                       rung="router", status="ok",
                       files={p: {"sha256": sha256(data), "mode": "0644"} for p, data in OLD.items()})
    return hooks, previous, files, kept, done


def test_the_previous_router_goes_back_by_rename_on_a_full_disk(host):
    hooks, previous, files, kept, done = host
    assert hooks.restore(object(), None, previous) == (Outcome.READY, "2+2= -> 4")
    assert files == OLD and not kept
    assert f"renamed {UNIT}" in done and "restart sglang-router" in done  # the env, already as it was: untouched


def test_a_file_with_no_kept_copy_is_written_and_a_full_disk_then_says_so(host):
    hooks, previous, files, kept, done = host
    kept.clear()
    with pytest.raises(routing.FleetError, match="No space left on device"):
        hooks.restore(object(), None, previous)
    assert "restart sglang-router" not in done
