"""`rollback --to ID` with an id one character off the host's (issue 46, finding 6: did you mean, for a name the
operator types; the eighteenth newcomer's hour): it said `no release 20261206T112544Z-c21` and nothing nearer, while
hosts, groups, playbooks, rungs and tasks each name the nearest. Ids of one day share most characters: only one a
character or two off is named."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fleet.deploy import rollback
from fleet.errors import FleetError
from fleet.inventory import Host

HOST = Host(name="sbx0", address="10.0.0.1", port=None, user=None, become=False, identity_file=None,
            known_hosts=None, ssh_config=None, proxy_jump=None, venv="/v", unit="sglang", groups=(),
            source=Path("hosts.yaml"))
IDS = ["20261206T112544Z-c214", "20261206T112707Z-76fb", "20261206T113400Z-aab7"]
STORE = SimpleNamespace(load=lambda rid: None, list=lambda: [SimpleNamespace(id=i) for i in IDS])


@pytest.mark.parametrize(("to", "near"), [
    ("20261206T112544Z-c21", "; did you mean 20261206T112544Z-c214?"),
    ("20261206T112707Z-76bf", "; did you mean 20261206T112707Z-76fb?"),
    ("20261205T000000Z-abcd", ""),  # another day's id: no release is near it
])
def test_an_id_a_character_off_names_the_hosts_nearest(to, near):
    with pytest.raises(FleetError) as refused:
        rollback.target(STORE, HOST, to)  # type: ignore[arg-type]
    assert str(refused.value) == f"sbx0: no release {to}{near} (see `inv history --host sbx0`)"
