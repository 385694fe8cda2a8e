"""fleet.ssh.remote against hostile hosts: every case ends within its deadline (exit status included), no
host can make the controller hold more than the call's cap, and the connection is still fleet's to use."""

from __future__ import annotations

import pytest
from hostkit import (
    HANG_EXEC,
    HostileFleet,
    answer,
    close_channel,
    dribble,
    drop,
    eof_no_status,
    flood,
    flood_stderr,
    garbage,
    no_eof,
    one_line,
    timed,
)

from fleet.ssh import remote
from fleet.ssh.connect import ConnectOptions, open_connection
from fleet.ssh.remote import ChannelFailed, CommandTimedOut, ConnectionLost, OutputTooLarge

DEADLINE = 1.5
SLACK = 1.5  # the deadline's thread and a 0.2 s read tick


def _run(tmp_path, behaviour, **kw):
    with HostileFleet(tmp_path, {"h": behaviour}) as fleet:
        host = fleet.hosts()[0]
        conn = open_connection(host, ConnectOptions())
        try:
            return timed(lambda: remote.run(conn, host, "some-command", timeout=DEADLINE, **kw))
        finally:
            conn.close()


@pytest.mark.parametrize("behaviour,why", [
    (eof_no_status(), "its output ended but no exit status came"),
    (no_eof(), "did not finish within"),
    (dribble(), "did not finish within"),
], ids=["eof-no-status", "no-eof", "dribble"])
def test_a_command_that_never_ends_times_out_at_its_deadline(tmp_path, behaviour, why):
    seconds, result = _run(tmp_path, behaviour)
    assert isinstance(result, CommandTimedOut), result
    assert why in str(result) and "h: `some-command`" in str(result)
    assert DEADLINE <= seconds < DEADLINE + SLACK


def test_an_exec_request_never_answered_times_out(tmp_path):
    seconds, result = _run(tmp_path, HANG_EXEC)
    assert isinstance(result, (CommandTimedOut, ConnectionLost)), result
    assert seconds < DEADLINE + SLACK


@pytest.mark.parametrize("behaviour,stream", [(flood(), "stdout"), (one_line(), "stdout"), (flood_stderr(), "stderr")],
                         ids=["flood", "one-line", "stderr-flood"])
def test_output_past_the_cap_is_an_error_that_says_so(tmp_path, behaviour, stream):
    seconds, result = _run(tmp_path, behaviour, max_output=1 << 20)
    assert isinstance(result, OutputTooLarge), result
    assert f"more than 1 MiB on {stream}" in str(result)
    assert seconds < DEADLINE


def test_binary_garbage_is_decoded_with_replacements(tmp_path):
    _, result = _run(tmp_path, garbage(status=3))
    assert isinstance(result, remote.CommandResult), result
    assert result.exited == 3 and "\ufffd" in result.stdout


def test_a_dropped_link_is_connection_lost_not_a_hang(tmp_path):
    seconds, result = _run(tmp_path, drop(b"half"))
    assert isinstance(result, ConnectionLost), result
    assert seconds < DEADLINE


def test_a_channel_closed_without_status_is_not_exit_zero(tmp_path):
    _, result = _run(tmp_path, close_channel())
    assert isinstance(result, (ConnectionLost, ChannelFailed)) or (
        isinstance(result, remote.CommandResult) and result.exited == -1), result


def test_the_connection_serves_the_next_command_after_a_timeout(tmp_path):
    with HostileFleet(tmp_path, {"h": (eof_no_status(), [("echo ok", answer(b"ok\n"))])}) as fleet:
        host = fleet.hosts()[0]
        conn = open_connection(host, ConnectOptions())
        try:
            with pytest.raises(CommandTimedOut):
                remote.run(conn, host, "stuck", timeout=0.5)
            assert remote.run(conn, host, "echo ok", timeout=5).stdout == "ok\n"
        finally:
            conn.close()


def test_an_ordinary_answer_is_whole(tmp_path):
    _, result = _run(tmp_path, answer(b"x" * 300_000, b"warn\n", status=0))
    assert isinstance(result, remote.CommandResult), result
    assert result.ok and len(result.stdout) == 300_000 and result.stderr == "warn\n"
