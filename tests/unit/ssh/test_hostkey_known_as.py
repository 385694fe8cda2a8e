"""An unknown host key that known_hosts holds under another name (issue 46, finding 10, a newcomer's form, h-new22):
an operator's ssh scripts log in as `ssh gpu-node-1`, so known_hosts has the key under that name, while the inventory
names the host by its address. fleet said `host key unknown (no entry for 10.0.0.1 ...); first contact?` and nothing
else, where ssh's own prompt says `This host key is known by the following other names/addresses:
~/.ssh/known_hosts:3: gpu-node-1`; the operator checked each host's console, or accepted the keys unchecked."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from fleet.ssh import known_hosts as knownhosts
from fleet.ssh.connect import UnknownHostKey, _HostKeyPolicy

KEY, OTHER = paramiko.ECDSAKey.generate(), paramiko.ECDSAKey.generate()


def _refusal(text: str, path: Path) -> UnknownHostKey:
    policy = _HostKeyPolicy(path, knownhosts.parse(text, str(path)), accept_new=False)
    with pytest.raises(UnknownHostKey) as refused:
        policy.missing_host_key(paramiko.SSHClient(), "10.0.0.1", KEY)
    return refused.value


def test_an_unknown_key_known_under_other_names_says_where(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host("gpu-node-1.lab")
    text = (f"gpu-node-2 {OTHER.get_name()} {OTHER.get_base64()}\n"
            f"gpu-node-1,gpu-node-1.lab {KEY.get_name()} {KEY.get_base64()}\n"
            f"{hashed} {KEY.get_name()} {KEY.get_base64()}\n")
    said = _refusal(text, path).known_as
    assert said == [f"{path}:2 (gpu-node-1,gpu-node-1.lab)", f"{path}:3 (a hashed name)"], said


def test_a_key_known_nowhere_says_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    assert _refusal(f"gpu-node-2 {OTHER.get_name()} {OTHER.get_base64()}\n", path).known_as == []


def test_the_refusal_names_those_lines_and_the_accept_that_records_it_under_this_name() -> None:
    said = knownhosts.other_names_said(["/k:2 (gpu-node-1)", "/k:3 (a hashed name)", "/k:4 (a)", "/k:5 (b)"])
    assert said.startswith(", which known_hosts has for another name: /k:2 (gpu-node-1), /k:3 (a hashed name), "
                           "/k:4 (a) and 1 more; the same host named otherwise"), said
    assert "--accept-new-host-keys" in said and knownhosts.other_names_said([]) == ""
