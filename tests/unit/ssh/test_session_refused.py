"""A host whose sshd refuses session channels (`MaxSessions 0`, pam_limits maxlogins): issue 46, finding 12, a
newcomer's form (h-new19). `inv logs` said `error: p2225: ChannelException(2, 'Connect failed')`, paramiko's repr;
the other tasks named the command by its first 60 quoted characters
(`sh -c '# fleet'"'"'s probe: every fact of a GPU host in one `) and the same repr."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakesession import HOST
from paramiko import ChannelException

from fleet.host import programs as hostside
from fleet.ssh import remote


class Refusing:
    """A live transport whose sshd answers every session request with SSH_OPEN_CONNECT_FAILED (2)."""

    def is_active(self) -> bool:
        return True

    def open_session(self, timeout: float | None = None) -> None:
        raise ChannelException(2, "Connect failed")


def conn() -> SimpleNamespace:
    transport = Refusing()
    return SimpleNamespace(transport=transport, client=SimpleNamespace(get_transport=lambda: transport))


def test_a_command_sshd_will_not_open_a_session_for_says_so_in_words_and_names_fleet_s_program():
    with pytest.raises(remote.ChannelFailed) as said:
        remote.run(conn(), HOST, hostside.sh_command("status.sh", "sglang", "", "/var/lib/fleet", "/usr/bin/python3"))
    text = str(said.value)
    assert text.startswith("h1: sshd there refused to open a session for `fleet-status` (SSH channel open failure 2: "
                           "Connect failed): its MaxSessions"), text
    assert "ChannelException(" not in text and "'\"'\"'" not in text


def test_the_journal_s_channel_refused_is_the_same_sentence_never_paramiko_s_repr():
    with pytest.raises(remote.ChannelFailed) as said:
        remote.open_channel(conn(), HOST, "journalctl -u sglang", 5.0, "the journal")  # type: ignore[arg-type]
    assert str(said.value).startswith("h1: sshd there refused to open a session for the journal (SSH channel open "
                                      "failure 2: Connect failed)")


def test_a_command_of_the_operator_is_named_as_typed():
    assert remote.label("hostname -f") == "hostname -f"
    assert remote.label("sh -c 'unbalanced") == "sh -c 'unbalanced"
