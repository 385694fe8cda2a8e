"""`inv logs` of a journal at its edges (issue 46, finding 9, newcomer h-new25's forms): a journal that spans a power
cut, a journal file journalctl skipped, and a busy server's journal too long to read within a fixed deadline.

- Across a reboot the lines of the server killed by the power cut ran straight into the next boot's `Started
  sglang.service`: journalctl's `-- Boot <id> --` was dropped, so a host that lost power read as a server restart.
- journalctl that skips a file (`Journal file ... is truncated, ignoring file.`, as a power cut leaves one) ends
  well, exit 0, and said so on its stderr, which fleet dropped: a hole in the lines with nothing said.
- Without -f a read was given up 300 s after it began, whatever came: on a journal of a few million lines (a busy
  server's week) `inv logs --only fatal` stopped before the latest lines, the ones asked for, saying `the journal did
  not end within 300s (without -f, journalctl ends on its own)`, as if the host had hung."""

from __future__ import annotations

import io
import json
import threading
import time
from types import SimpleNamespace

import pytest
from fakesession import HOST
from rich.console import Console

from fleet.cli import logs
from fleet.logs import follow, journal

BOOT = "0514cab055dc4ba6be8bbd23544027ec"
JOURNAL = [
    "2026-12-06T18:56:32+0000 sbx0 python[407]: INFO:     127.0.0.1:51598 - \"GET /get_server_info HTTP/1.1\" 200 OK",
    f"-- Boot {BOOT} --",
    "2026-12-06T18:57:16+0000 sbx0 systemd[1]: Started sglang.service - sglang glm5-nvfp4 (no-fusion).",
]


class Channel:
    """paramiko's channel as the follower reads it: `out` on stdout, `err` on stderr, then exit `status`."""

    def __init__(self, out: list[bytes], err: bytes = b"", status: int = 0, every: float = 0.0,
                 silent: bool = False) -> None:
        self.chunks = [journal.MARK + b"".join(out[:1])] + list(out[1:])  # fleet's mark: journalctl ran
        self.err, self.exit_status, self.every, self.silent = err, status, every, silent
        self.status_event = threading.Event()
        self.status_event.set()

    def settimeout(self, timeout: float) -> None:
        pass

    def recv(self, size: int) -> bytes:
        time.sleep(self.every)
        if not self.chunks and self.silent:  # a host that stopped answering: nothing within the read's timeout
            time.sleep(0.1)
            raise TimeoutError
        return self.chunks.pop(0) if self.chunks else b""

    def recv_stderr_ready(self) -> bool:
        return bool(self.err)

    def recv_stderr(self, size: int) -> bytes:
        said, self.err = self.err[:size], self.err[size:]
        return said

    def exit_status_ready(self) -> bool:
        return not self.chunks and not self.silent

    def get_transport(self) -> None:
        return None

    def close(self) -> None:
        pass


def _host(monkeypatch, channel: Channel) -> None:
    """follow.stream against `channel` (nothing deployed: the inventory's unit)."""
    monkeypatch.setattr(follow, "open_connection", lambda host, opts: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(follow, "ReleaseStore", lambda conn, host: SimpleNamespace(current=lambda: None))
    monkeypatch.setattr(journal.hostjournal, "open_follower", lambda conn, host, command, open_s: channel)


def _run(only: str | None = None, as_json: bool = False) -> tuple[int, str, str]:
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    err = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    rc = logs.run([HOST], None, False, None, only, as_json, console, err=err)  # type: ignore[arg-type]
    return rc, console.export_text(), err.export_text()


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")  # this machine's zone, the host's: no offset said
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_journal_across_a_power_cut_says_where_the_host_started_again(monkeypatch, utc):
    _host(monkeypatch, Channel([("\n".join(JOURNAL) + "\n").encode()]))
    rc, out, _ = _run()
    shown = out.splitlines()
    assert rc == 0 and len(shown) == 3, shown
    assert shown[0].startswith("h1 12-06 18:56:32 INFO:") and shown[2].startswith("h1 12-06 18:57:16 Started"), shown
    # fails before: the two boots' lines ran together, a power cut read as a restart
    assert shown[1] == f"h1                -- Boot {BOOT} --: the host started again here (a reboot or a power cut)"


def test_the_boot_mark_is_a_record_of_its_own_in_json_and_shows_with_only(monkeypatch, capsys):
    _host(monkeypatch, Channel([("\n".join(JOURNAL) + "\n").encode()]))
    assert _run(as_json=True)[0] == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["time"], r["text"], r["boot"]) for r in records if r["boot"]] == [(None, JOURNAL[1], BOOT)], records
    assert all(r["boot"] is None for r in records if r["text"] != JOURNAL[1])
    _host(monkeypatch, Channel([("\n".join(JOURNAL) + "\n").encode()]))
    rc, out, _ = _run(only="fatal")  # as `journalctl -p err` shows its boot marks between the lines it keeps
    assert rc == 0 and out.splitlines() == [f"h1                -- Boot {BOOT} --: the host started again here (a "
                                            "reboot or a power cut)"], out


def test_a_journal_file_journalctl_skipped_is_said_on_stderr(monkeypatch, capsys, utc):
    skipped = (b"Journal file /var/log/journal/7aa6/system@883b-35e.journal is truncated, ignoring file.\n"
               b"Journal file /var/log/journal/7aa6/system@883b-35e.journal is truncated, ignoring file.\n"
               b"\x1b[2J\x1b]0;owned\x07 a hostile host's words\n")
    _host(monkeypatch, Channel([(JOURNAL[2] + "\n").encode()], err=journal.MARK + skipped))
    rc, out, _ = _run()
    err = capsys.readouterr().err
    assert rc == 0 and out.startswith("h1 12-06 18:57:16 Started"), out
    # fails before: journalctl's stderr was dropped where it ended well
    assert err.count("fleet: h1: journalctl said: Journal file /var/log/journal/7aa6/system@883b-35e.journal is "
                     "truncated, ignoring file.") == 1, err
    assert "Journal file" not in out
    assert "journalctl said: \\x1b[2J\\x1b]0;owned\\x07 a hostile host's words" in err, err  # shown, never obeyed


def test_a_journal_still_sending_lines_is_read_to_its_end_however_long(monkeypatch):
    """A journal longer to read than READ_ALL_S (here 0.5 s: 40 lines, one every 50 ms) is read whole: the deadline
    is on silence, so the latest line (the fatal one `--only fatal` was asked for) is reached."""
    monkeypatch.setattr(follow, "READ_ALL_S", 0.5)
    lines = [f"2026-12-06T19:00:{i % 60:02d}+0000 sbx0 python[30]: INFO:     GET /health {i}\n".encode()
             for i in range(40)]
    _host(monkeypatch, Channel(lines, every=0.05))
    start = time.monotonic()
    rc, out, err = _run()
    assert time.monotonic() - start > 0.5  # longer than the deadline was
    assert rc == 0 and len(out.splitlines()) == 40 and "GET /health 39" in out, (out, err)  # fails before: 1, cut
    assert "did not end" not in err


def test_a_journal_that_goes_silent_is_given_up_saying_how_far_it_got(monkeypatch):
    monkeypatch.setattr(follow, "READ_ALL_S", 0.5)
    _host(monkeypatch, Channel([b"2026-12-06T19:00:01+0000 sbx0 python[30]: INFO:     GET /health\n"], silent=True))
    rc, out, err = _run()
    assert rc == 1 and "GET /health" in out, out
    assert "h1: the journal sent no line for 0.5s before its end (without -f, journalctl ends on its own); 1 line " \
           "read, the last of 2026-12-06T19:00:01+0000: stopped reading it" in " ".join(err.split()), err


def test_journalctls_hint_is_said_while_it_follows(monkeypatch):
    """`inv logs -f` as a login outside systemd-journal (user: fleet, no become; sbx0): journalctl prints its Hint
    (`You are currently not seeing messages from other users and the system.`) and then no line, ever: -f showed
    nothing at all, with nothing said. Its words come on stderr once it has run STATUS_S without refusing."""
    monkeypatch.setattr(journal, "STATUS_S", 0.2)
    hint = (b"Hint: You are currently not seeing messages from other users and the system.\n"
            b"      Users in groups 'adm', 'systemd-journal' can see all messages.\n")
    _host(monkeypatch, Channel([], err=journal.MARK + hint, silent=True))
    got: list[follow.LogLine] = []
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    follow.stream(HOST, None, True, None, got.append, stop)  # type: ignore[arg-type]
    assert [(line.aside, line.text) for line in got] == [
        (True, "Hint: You are currently not seeing messages from other users and the system."),
        (True, "Users in groups 'adm', 'systemd-journal' can see all messages.")], got  # fails before: none
