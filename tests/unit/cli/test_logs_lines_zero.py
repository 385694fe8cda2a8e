"""`inv logs -f -n 0`: follow only what comes from now on, as `tail -n 0 -f` and `journalctl -n 0 -f` do: issue
46, finding 9, a newcomer's form (h-new19). It was refused, exit 2 (`--lines 0: give a number of lines from 1 to
1,000,000, or all`), while docs/cli.md calls -n journalctl's -n."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from fleet.cli import logs
from fleet.errors import InputError
from fleet.logs.follow import check_lines, journal_command


def test_follow_from_now_on_asks_journalctl_for_no_line_before():
    asked: list[object] = []

    def stream(host, opts, follow, since, emit, stop, count=None) -> None:
        asked.append((follow, count, journal_command("sglang", follow, since, count)))

    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    logs.run([SimpleNamespace(name="sbx0")], None, True, None, None, False, console,  # type: ignore[arg-type]
             lines="0", read=stream)
    ((follow, count, command),) = asked
    assert (follow, count) == (True, 0) and command.endswith(" -n 0 -f")
    assert check_lines("0") == 0


def test_no_line_without_follow_is_refused_saying_what_it_means_with_f():
    with pytest.raises(InputError, match=r"--lines 0 shows nothing without -f; with -f it follows only"):
        logs.run([SimpleNamespace(name="sbx0")], None, False, None, None, False,  # type: ignore[arg-type]
                 Console(file=io.StringIO()), lines="0", read=lambda *a, **k: None)
