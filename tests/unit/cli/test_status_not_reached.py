"""`inv status` of a host whose key changed in the middle of a fleet (issue 46, 10, a newcomer's form): its row
and the exit-1 line said `unreachable`, as for a host down or a cut link, though it answered and fleet refused
its key (only the folded line under the board said `host key CHANGED`). A host SSH reached and fleet did not go
on with (a host key, a login) is `not reached`; one SSH could not reach stays `unreachable`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet import parallel
from fleet.cli.status import not_clean
from fleet.cli.status_view import _state
from fleet.errors import ConnectError
from fleet.inventory import Host
from fleet.multihost.status import _row

HOST = Host(name="sbx1", address="10.0.0.1", port=22, user="root", become=False, identity_file=None,
            known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
            source=Path("hosts.yaml"))


@pytest.mark.parametrize(("unreachable", "said"), [(False, "not reached"), (True, "unreachable")])
def test_a_host_that_answered_and_was_refused_is_not_called_unreachable(unreachable: bool, said: str) -> None:
    def connect(host: Host) -> None:
        raise ConnectError(f"{host.name} (root@10.0.0.1:22): host key CHANGED (...): refusing", unreachable)

    row = _row(parallel.outcome_of(HOST, connect))
    assert (row.ok, not_clean(row), _state(row)[0]) == (False, said, said)
