"""`inv logs` reads the journal of the unit the host's current release serves from, not the inventory's `unit`
(issue 46, finding 8; the fifteenth newcomer's hour): a playbook's `serve.unit` wins over the inventory's for the
deploy, so after deploying one with `serve: {unit: sglang-b}` `inv logs` said `no journal lines`, exit 0, of a
server that was serving and logging."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from fleet.inventory import Host
from fleet.logs import follow

HOST = Host(name="h", address="10.0.0.1", port=None, user=None, become=False, identity_file=None, known_hosts=None,
            ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(), source=Path("hosts.yaml"))
FILES = {"before:/etc/systemd/system/sglang-b.service": {"absent": True},
         "/etc/systemd/system/sglang-b.service": {"sha256": "0" * 64}, "/etc/fleet/sglang-b.env": {"sha256": "1" * 64}}


@pytest.mark.parametrize(("current", "unit"), [
    (SimpleNamespace(files=FILES, facts={}), "sglang-b"),
    (None, "sglang"),  # nothing deployed: the inventory's unit, as before
])
def test_the_journal_read_is_the_current_releases_unit(monkeypatch, current, unit):
    asked: list[str] = []
    monkeypatch.setattr(follow, "open_connection", lambda host, opts: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(follow, "ReleaseStore", lambda conn, host: SimpleNamespace(current=lambda: current))
    monkeypatch.setattr(follow.journal, "Follower", lambda conn, host, command: asked.append(command))
    monkeypatch.setattr(follow, "read_lines", lambda *a, **k: None)
    follow.stream(HOST, None, False, None, lambda line: None, threading.Event())  # type: ignore[arg-type]
    assert len(asked) == 1 and f"-u {unit} " in asked[0] + " " and f"-u {unit}-" not in asked[0], asked
