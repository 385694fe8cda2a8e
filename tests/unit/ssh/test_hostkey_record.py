"""--accept-new-host-keys where the known_hosts file cannot be written (issue 46, 10, a newcomer's form): the key
is said as taken for this run only, never silently. It was an OSError out of paramiko's host-key policy, which
connect took for a failed connection and retried; the retry found the key in the client's memory, so the probe
went on, exit 0, nothing said on stderr, `-v` claiming `recorded on first contact`, and known_hosts still empty."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from fleet.ssh import known_hosts as knownhosts
from fleet.ssh.connect import _HostKeyPolicy

KEY = paramiko.ECDSAKey.generate()


@pytest.mark.parametrize("writable", [True, False])
def test_a_new_key_is_said_whether_or_not_known_hosts_took_it(tmp_path: Path, writable: bool) -> None:
    if writable:
        path = tmp_path / "ssh" / "known_hosts"
    else:
        (tmp_path / "ssh").write_text("a file where the folder should be\n")  # unwritable, for root too
        path = tmp_path / "ssh" / "known_hosts"
    told: list[str] = []
    policy = _HostKeyPolicy(path, knownhosts.KnownHosts(), accept_new=True, told=told.append, label="sbx0")
    client = paramiko.SSHClient()
    policy.missing_host_key(client, "10.0.0.1", KEY)
    assert len(told) == 1, told
    assert KEY.fingerprint in told[0] and str(path) in told[0], told
    assert client.get_host_keys().lookup("10.0.0.1") is not None  # this run goes on, as OpenSSH's accept-new
    if writable:
        assert told[0].startswith("sbx0: recorded new host key"), told
        assert path.read_text() == f"10.0.0.1 {KEY.get_name()} {KEY.get_base64()}\n"
        assert policy.fate == f"recorded on first contact in {path}"
    else:
        assert told[0].startswith("sbx0: accepted new host key"), told
        assert "for this run only: it could not be recorded in" in told[0], told
        assert "a run without --accept-new-host-keys refuses it" in told[0], told
        assert policy.fate is not None and "NOT recorded" in policy.fate
