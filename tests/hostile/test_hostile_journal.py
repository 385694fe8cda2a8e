"""The journal follower against hostile hosts: a line longer than MAX_LINE is cut and the rest of it dropped,
so no host can grow the follower's buffer; a journal whose exec request is never answered gives up."""

from __future__ import annotations

import pytest
from hostkit import HANG_EXEC, HostileFleet, answer, close_channel, drop, eof_no_status, one_line, timed

from fleet.errors import FleetError
from fleet.logs import journal
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import MARK, CommandTimedOut, ConnectionLost


def _follow(tmp_path, behaviour, reads):
    with HostileFleet(tmp_path, {"h": behaviour}) as fleet:
        host = fleet.hosts()[0]
        conn = open_connection(host, ConnectOptions())
        try:
            follower = journal.Follower(conn, host, journal.command("sglang"))
            got, biggest = [], 0
            for _ in range(reads):
                text = follower.read(2)
                if text is None:
                    break
                got.append(text)
                biggest = max(biggest, len(follower._buf))
            follower.close()
            return "".join(got), biggest
        finally:
            conn.close()


def test_an_endless_line_is_cut_and_the_buffer_stays_bounded(tmp_path):
    text, biggest = _follow(tmp_path, one_line(), reads=200)  # about 13 MB sent
    assert biggest <= journal.MAX_LINE
    lines = text.splitlines()
    assert lines and all(line.endswith(journal.CUT) for line in lines)
    assert max(len(line) for line in lines) == journal.MAX_LINE + len(journal.CUT)


def test_the_line_after_a_cut_one_is_whole(tmp_path):
    text, _ = _follow(tmp_path, answer(b"a" * 200_000 + b"\nnext line\n" + b"b" * 70_000 + b"\nlast\n"), reads=50)
    assert text.splitlines() == ["a" * journal.MAX_LINE + journal.CUT, "next line",
                                 "b" * journal.MAX_LINE + journal.CUT, "last"]


def test_a_journal_never_started_gives_up(tmp_path, monkeypatch):
    monkeypatch.setattr(journal, "OPEN_S", 1.0)
    with HostileFleet(tmp_path, {"h": HANG_EXEC}) as fleet:
        host = fleet.hosts()[0]
        conn = open_connection(host, ConnectOptions())
        try:
            seconds, result = timed(lambda: journal.Follower(conn, host, journal.command("sglang")))
        finally:
            conn.close()
    assert isinstance(result, CommandTimedOut), result
    assert "the journal did not start within 1s" in str(result) and seconds < 3



def _read_through(tmp_path, behaviour):
    """What 20 reads of the journal's follower end in, on a host that answers as `behaviour`."""
    with HostileFleet(tmp_path, {"h": behaviour}) as fleet:
        host = fleet.hosts()[0]
        conn = open_connection(host, ConnectOptions())
        try:
            follower = journal.Follower(conn, host, journal.command("sglang"))
            return timed(lambda: [follower.read(2) for _ in range(20)])[1]
        finally:
            conn.close()


def test_a_journal_journalctl_refused_is_an_error_naming_why_not_an_empty_one(tmp_path):
    """`inv logs --since 99999999d` passed fleet's check, journalctl on the host refused it (exit 1, 'Failed to parse
    timestamp') and fleet said `no journal lines since 99999999d`, exit 0: the refusal is the host's error now."""
    # as fleet's command runs it: its mark on both streams (it ran), then journalctl's refusal. Without the mark
    # the host ran something else in its place (a ForceCommand, nologin: the next test)
    refused = answer(stdout=MARK, stderr=MARK + b"Failed to parse timestamp: -99999999d\n", status=1)
    result = _read_through(tmp_path, refused)
    assert isinstance(result, FleetError), result
    assert str(result) == "h: journalctl refused (exit 1): Failed to parse timestamp: -99999999d", str(result)


def test_a_refusal_with_no_mark_is_a_command_that_did_not_run(tmp_path):
    """No mark and exit 1: what ran was not fleet's command (nologin's `This account is currently not available.`,
    a ForceCommand): said as such, never as journalctl's refusal (newcomer h-new19)."""
    nologin = answer(stdout=b"This account is currently not available.\n", status=1)
    result = _read_through(tmp_path, nologin)
    assert isinstance(result, FleetError), result
    assert str(result).startswith("h: the journal's command did not run (exit 1, it printed 'This account is "
                                  "currently not available.')"), str(result)


def test_a_journal_that_ends_well_is_none_with_its_warnings_aside(tmp_path):
    done = answer(b"2026-12-05T02:56:32+0000 h python3[1]: ready\n", b"Hint: not seeing messages of other users\n")
    text, _ = _follow(tmp_path, done, reads=20)
    assert text == "2026-12-05T02:56:32+0000 h python3[1]: ready\n"


def _ended_by(tmp_path, behaviour):
    with HostileFleet(tmp_path, {"h": behaviour}) as fleet:
        host = fleet.hosts()[0]
        conn = open_connection(host, ConnectOptions())
        try:
            follower = journal.Follower(conn, host, journal.command("sglang"))
            return timed(lambda: [follower.read(1) for _ in range(10)])[1]
        finally:
            conn.close()


def test_a_journal_whose_connection_drops_under_it_is_the_link_lost(tmp_path):
    """`inv logs -H sbx2 -f` and sbx2 powered off (inv sandbox.kill): the follow ended, 'no journal lines: sbx2',
    exit 0, as if the unit had logged nothing; journalctl -f never ends by itself."""
    result = _ended_by(tmp_path, drop())
    assert isinstance(result, ConnectionLost), result
    assert str(result).startswith("h: connection lost while following the journal"), str(result)


@pytest.mark.parametrize("behaviour", [close_channel(), eof_no_status(b"")], ids=["closed", "eof"])
def test_a_journal_ended_without_a_status_on_a_live_link_is_not_the_link_lost(tmp_path, behaviour):
    """journalctl killed by a signal (sshd sends exit-signal, which paramiko keeps not) closes its channel while
    the connection stays up: the review of stop 52 found it said as 'connection lost' ('the host or its sshd
    went'), and a deploy's watch took the link-lost path for it. It is JournalEnded: the host's error for
    `inv logs`, the stream's end for the watch."""
    result = _ended_by(tmp_path, behaviour)
    assert isinstance(result, journal.JournalEnded) and not isinstance(result, ConnectionLost), result
    assert str(result).startswith("h: journalctl ended without its exit status"), str(result)
