"""Why a connection failed, in the word every per-host row shows (fleet.errors.NotReached): a host that answered
with a key fleet does not know, or another key than known_hosts has, was `unreachable` on `inv status`'s row,
which an operator reads as the network. Real paramiko on both ends, on loopback."""

from __future__ import annotations

from pathlib import Path

import loopback
import paramiko
import pytest

from fleet.errors import ConnectError, NotReached
from fleet.inventory import Host
from fleet.ssh.connect import ConnectOptions, Timeouts, open_connection

KEY = paramiko.RSAKey.generate(2048)  # made here: no private key kept in the repository


def _connect(tmp_path: Path, port: int, known: str) -> ConnectError:
    (tmp_path / "known_hosts").write_text(known)
    host = Host(name="h", address="127.0.0.1", port=port, user="root", become=False, identity_file=None,
                known_hosts=str(tmp_path / "known_hosts"), ssh_config=None, proxy_jump=None, venv="/root/ml-env",
                unit="sglang", groups=(), source=tmp_path / "hosts.yaml")
    with pytest.raises(ConnectError) as err:
        open_connection(host, ConnectOptions(timeouts=Timeouts(connect=5.0, banner=5.0), attempts=1))
    return err.value


def test_a_host_offering_a_key_no_known_hosts_line_vouches_for_is_an_unknown_key_not_unreachable(tmp_path):
    with loopback.Listener(loopback.ssh_server(KEY)) as server:
        err = _connect(tmp_path, server.port, "")
    assert "host key unknown" in str(err), err
    assert (err.cause, err.unreachable) == (NotReached.UNKNOWN_KEY, False)


def test_a_host_offering_another_key_than_known_hosts_has_is_a_changed_key(tmp_path):
    other = paramiko.RSAKey.generate(2048)
    with loopback.Listener(loopback.ssh_server(KEY)) as server:
        err = _connect(tmp_path, server.port, f"[127.0.0.1]:{server.port} {other.get_name()} {other.get_base64()}\n")
    assert "host key CHANGED" in str(err), err
    assert (err.cause, err.unreachable) == (NotReached.CHANGED_KEY, False)


def test_a_host_that_closes_before_the_banner_is_unreachable(tmp_path):
    with loopback.Listener(loopback.close) as server:
        err = _connect(tmp_path, server.port, "")
    assert (err.cause, err.unreachable) == (NotReached.UNREACHABLE, True)


def test_a_jump_hosts_unknown_key_is_not_the_targets(tmp_path):
    """The row word is the target's: a jump host that refused the way (its key unknown) left the target `unknown key`,
    as if the target had offered it, where docs/cli.md says `not reached` (review of the diff)."""
    (tmp_path / "known_hosts").write_text("")
    with loopback.Listener(loopback.ssh_server(KEY)) as server:
        host = Host(name="h", address="127.0.0.2", port=22, user="root", become=False, identity_file=None,
                    known_hosts=str(tmp_path / "known_hosts"), ssh_config=None,
                    proxy_jump=f"root@127.0.0.1:{server.port}", venv="/root/ml-env", unit="sglang", groups=(),
                    source=tmp_path / "hosts.yaml")
        with pytest.raises(ConnectError) as err:
            open_connection(host, ConnectOptions(timeouts=Timeouts(connect=5.0, banner=5.0), attempts=1))
    assert "host key unknown" in str(err.value), err.value
    assert (err.value.cause, err.value.unreachable) == (NotReached.OTHER, False)


@pytest.mark.parametrize("hashed", [True, False])
def test_a_key_taken_on_first_contact_is_recorded_hashed_where_ssh_config_says_hash_known_hosts(tmp_path, hashed):
    """A newcomer's ssh_config has `HashKnownHosts yes` (issue 46, 10, a new form): `--accept-new-host-keys`
    wrote `127.0.0.1 ssh-rsa AAAA...`, the address in clear where `ssh` writes `|1|salt|hash`, and said nothing
    of it; known_hosts then lists the fleet's addresses to whoever reads it."""
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "ssh_config").write_text(f"Host *\n  HashKnownHosts {'yes' if hashed else 'no'}\n")
    told: list[str] = []
    with loopback.Listener(loopback.ssh_server(KEY)) as server:
        port = server.port
        host = Host(name="h", address="127.0.0.1", port=port, user="root", become=False, identity_file=None,
                    known_hosts=str(tmp_path / "known_hosts"), ssh_config=str(tmp_path / "ssh_config"),
                    proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(), source=tmp_path / "hosts.yaml")
        with pytest.raises(ConnectError) as err:  # the key is taken, then the login refused
            open_connection(host, ConnectOptions(timeouts=Timeouts(connect=5.0, banner=5.0), attempts=1,
                                                 accept_new_host_keys=True, on_new_host_key=told.append))
    assert err.value.cause == NotReached.LOGIN, err.value
    name, kind, blob = (tmp_path / "known_hosts").read_text().split()
    assert (kind, blob) == (KEY.get_name(), KEY.get_base64())
    if hashed:
        assert name.startswith("|1|") and str(port) not in name, name
        assert paramiko.HostKeys.hash_host(f"[127.0.0.1]:{port}", name.split("|")[2]) == name
        assert len(told) == 1 and "(hashed: HashKnownHosts yes)" in told[0], told
    else:
        assert name == f"[127.0.0.1]:{port}" and "hashed" not in told[0], told
