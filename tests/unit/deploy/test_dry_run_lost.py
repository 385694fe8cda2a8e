"""Found by review (stop 44): `inv deploy --dry-run` whose link drops mid-probe said `connection lost mid-deploy`
(ConnectionLost) before the run skeleton, and let the raw EOFError through after it."""

from __future__ import annotations

import pytest
from fakesession import HOST

from fleet import playbook
from fleet.deploy import ladder
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import ConnectionLost

BOOK = """name: one
model: {path: /models/m}
ladder:
  - name: base
"""


class DeadTransport:
    def is_active(self):
        return False


class Conn:
    transport = DeadTransport()

    def close(self):
        pass


def test_a_link_lost_in_a_dry_run_is_said_as_lost(tmp_path, monkeypatch):
    path = tmp_path / "one.yaml"
    path.write_text(BOOK)
    d = ladder.Deployer(HOST, playbook.load(path), path, ConnectOptions())
    monkeypatch.setattr(ladder, "open_connection", lambda host, opts: Conn(), raising=False)  # as at 6f62ade
    monkeypatch.setattr("fleet.host.session.open_connection", lambda host, opts: Conn(), raising=False)
    monkeypatch.setattr("fleet.ssh.remote.keepalive.lost", lambda transport: None)

    def probe_on(conn, host):
        raise EOFError()

    monkeypatch.setattr(ladder.probe_run, "probe_on", probe_on)
    with pytest.raises(ConnectionLost):
        d.run(dry_run=True)
