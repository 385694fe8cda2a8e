"""Found by review (stop 44): `inv deploy --dry-run` whose link drops mid-probe said `connection lost mid-deploy`
(ConnectionLost) before the run skeleton, and let the raw EOFError through after it."""

from __future__ import annotations

import pytest
from fakesession import HOST, FakeSession

from fleet import playbook
from fleet.deploy import ladder
from fleet.ssh.connect import ConnectOptions
from fleet.ssh.remote import ConnectionLost

BOOK = """name: one
model: {path: /models/m}
ladder:
  - name: base
"""


class Dropped(FakeSession):
    """Its link drops mid-probe: the probe's SFTP call sees a plain EOFError, and the link is found gone (what
    fleet.ssh.remote.lost_link finds on a transport that is no longer active)."""

    def probe(self, say=None):
        raise EOFError()

    def lost(self, where, exc=None):
        raise ConnectionLost(f"{self.host.name}: connection lost {where}: the link dropped")


def test_a_link_lost_in_a_dry_run_is_said_as_lost(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(BOOK)
    session = Dropped()
    d = ladder.Deployer(HOST, playbook.load(path), path, ConnectOptions(), sessions=lambda host, opts: session)
    with pytest.raises(ConnectionLost, match="connection lost mid-deploy"):
        d.run(dry_run=True)
    assert session.sent[-1] == "close"
