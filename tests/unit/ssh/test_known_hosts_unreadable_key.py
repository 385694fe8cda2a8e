"""A known_hosts line whose key its type cannot read is skipped, as OpenSSH skips it: issue 46, findings 10 and 12,
a newcomer's form (h-new19). One line `|1|salt|hash ssh-ed25519 AAAA` (a key cut short, a hand edit) made every
host of the fleet `probe failed` / `failed`, each saying `SSHException: Invalid key (class: Ed25519Key, data
type: ` (paramiko's message, cut at its newline), the file and line named nowhere."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.ssh import known_hosts

GOOD = ("172.30.74.10 ssh-ed25519 "
        "AAAAC3NzaC1lZDI1NTE5AAAAIEt4oH9i8xxIek1edLXqvVHpg0+E4mnGQ2p2n2b2vF1v")


@pytest.mark.parametrize("bad", ["|1|bad|hash ssh-ed25519 AAAA", "10.0.0.9 ssh-ed25519 AAAA",
                                 "10.0.0.9 ecdsa-sha2-nistp256 AAAA"])
def test_a_line_whose_key_cannot_be_read_is_skipped_and_the_others_still_vouch(bad):
    known = known_hosts.parse(f"{bad}\n{GOOD}\n", "/x/known_hosts")
    assert [e.where for e in known.entries] == ["/x/known_hosts:2"]
    assert set(known.keys_for("172.30.74.10")) == {"ssh-ed25519"}


def test_a_known_hosts_that_is_a_folder_is_one_line_naming_it_and_the_host(tmp_path):
    """`known_hosts: ~/.ssh` (the folder) in the inventory: every host's row said Python's `IsADirectoryError:
    [Errno 21] Is a directory: '/root/.ssh'`."""
    with pytest.raises(FleetError) as said:
        known_hosts.load_all([tmp_path], "sbx0")
    assert str(said.value).startswith(f"sbx0: known_hosts {tmp_path}: cannot be read (Is a directory): name the "
                                      "file itself"), said.value


def test_a_changed_key_vouched_for_by_a_pattern_line_is_not_advised_ssh_keygen_r():
    """Cloned VM images with one host key, vouched for by `172.30.74.* ssh-ed25519 ...`: one host reinstalled was
    `key changed` with the advice `ssh-keygen -R 172.30.74.10 -f FILE`, which drops the pattern line, and with it
    every other host's key (ssh-keygen -R removes a line whose pattern matches)."""
    known = known_hosts.parse(GOOD.replace("172.30.74.10", "172.30.74.*", 1) + "\n", "/x/known_hosts")
    (key,) = known.keys_for("172.30.74.10").values()
    said = known.how_to_remove("172.30.74.10", key, known.where("172.30.74.10", key))
    assert said.startswith("edit that line by hand: its pattern 172.30.74.* vouches for other hosts too"), said
    plain = known_hosts.parse(GOOD + "\n", "/x/known_hosts")
    (key,) = plain.keys_for("172.30.74.10").values()
    assert plain.how_to_remove("172.30.74.10", key, "/x/known_hosts:1") == (
        "remove that line (`ssh-keygen -R 172.30.74.10 -f /x/known_hosts`)")
