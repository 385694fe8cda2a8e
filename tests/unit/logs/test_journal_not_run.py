"""`inv logs` of a host that runs something else in place of journalctl (sshd's ForceCommand /usr/sbin/nologin, an
authorized_keys command=): issue 46, findings 9 and 12, a newcomer's form (h-new19). It showed nologin's words as
a journal line with no time (`p2229 -------------- This account is currently not available.`), then `journalctl
refused (exit 1): nothing on stderr`: journalctl never ran."""

from __future__ import annotations

import threading

import pytest
from fakesession import HOST

from fleet.errors import FleetError
from fleet.logs import journal


class Channel:
    """What paramiko's channel gives the follower: `chunks` of stdout, then its end with `status`."""

    def __init__(self, chunks: list[bytes], status: int) -> None:
        self.chunks, self.exit_status = list(chunks), status
        self.status_event = threading.Event()
        self.status_event.set()

    def settimeout(self, timeout: float) -> None:
        pass

    def recv(self, size: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def recv_stderr_ready(self) -> bool:
        return False

    def get_transport(self) -> None:
        return None

    def close(self) -> None:
        pass


def follower(monkeypatch, chunks: list[bytes], status: int) -> journal.Follower:
    monkeypatch.setattr(journal.hostjournal, "open_follower", lambda conn, host, command, open_s: Channel(chunks,
                                                                                                          status))
    return journal.Follower(None, HOST, "journalctl -u sglang")  # type: ignore[arg-type]


@pytest.mark.parametrize(("chunks", "said"), [
    ([b"This account is currently not available.\n"], "it printed 'This account is currently not available.'"),
    ([], "no output"),  # ForceCommand /bin/false
])
def test_a_command_that_failed_without_the_mark_is_the_host_running_something_else(monkeypatch, chunks, said):
    f = follower(monkeypatch, chunks, 1)
    with pytest.raises(FleetError) as error:
        while f.read(0.1) is not None:
            pass
    text = str(error.value)
    assert text.startswith(f"h1: the journal's command did not run (exit 1, {said})"), text
    assert "nologin" in text and "journalctl refused" not in text


def test_an_unmarked_journal_that_ended_well_is_still_the_journal(monkeypatch):
    f = follower(monkeypatch, [b"2026-12-06T11:26:09+0000 sbx0 python[1]: hello\n"], 0)
    got = ""
    while (part := f.read(0.1)) is not None:
        got += part
    assert got == "2026-12-06T11:26:09+0000 sbx0 python[1]: hello\n"
