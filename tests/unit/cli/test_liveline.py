"""Where a long step stands (fleet.progress.Live): drawn in place on a terminal (fleet.cli.liveline); where the
output is not one (--json's stderr lines, a pipe) printed as a heartbeat every 30 s, while each phase's own line is
always printed."""

from __future__ import annotations

import io

from fleet.cli import deploy as deploy_cmd
from fleet.cli.liveline import Heartbeat, LiveLine
from fleet.progress import Live, prefixed


def test_a_live_line_is_redrawn_in_place_and_wiped_before_the_next_line():
    out = io.StringIO()
    line = LiveLine(out, True, 40)
    line.show("sbx0 [fast] phase jit: 42s of 900s budget; last line: compiling kernel 3 of 12")
    line.show("sbx0 [fast] phase jit: 43s")
    line.clear()
    line.clear()
    text = out.getvalue()
    assert text.count("\r\x1b[2K") == 3 and "\n" not in text
    assert all(len(part) <= 40 for part in text.split("\r\x1b[2K"))


def test_nothing_is_drawn_where_the_output_is_no_terminal():
    out = io.StringIO()
    line = LiveLine(out, False, 80)
    line.show("sbx0 phase jit: 42s of 900s budget")
    line.clear()
    assert out.getvalue() == ""


def test_with_json_live_lines_are_dropped_and_phase_lines_kept(capsys):
    say = deploy_cmd.host_say(True, live=True)
    say("sbx0", prefixed("[fast] ", Live("phase jit: 42s of 900s budget; last line: x")))
    say("sbx0", prefixed("[fast] ", "phase jit (after 3.0s in weight_load; budget 900s)"))
    assert capsys.readouterr().err == "sbx0 [fast] phase jit (after 3.0s in weight_load; budget 900s)\n"
    assert isinstance(prefixed("[a] ", Live("x")), Live) and not isinstance(prefixed("[a] ", "x"), Live)


def test_without_json_progress_lines_go_to_stderr_and_stdout_keeps_only_the_data(capsys):
    """docs/cli.md: progress is on stderr. Without --json, `sbx0 probing` and the phase lines went to stdout
    (a newcomer's hour), so `inv deploy > result` caught them."""
    say = deploy_cmd.host_say(False, live=True)
    say("sbx0", "probing")
    say("sbx0", prefixed("[fast] ", "phase jit (after 3.0s in weight_load; budget 900s)"))
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["sbx0 probing", "sbx0 [fast] phase jit (after 3.0s in weight_load; budget 900s)"]


def test_off_a_terminal_a_long_phase_says_where_it_stands_every_30_seconds(capsys):
    """A 3-minute JIT with --json (or piped) printed its phase line, then nothing for 3 minutes: it looked like a
    hang. Now a Live line is printed once the host has said nothing for 30 s."""
    now = [0.0]
    say = deploy_cmd.host_say(True, live=True, heartbeat=Heartbeat(30, clock=lambda: now[0]))
    say("sbx0", "[fast] phase jit_compile (after 3.0s in weight_load; budget 1200s)")
    for second in range(1, 181):  # a Live line each second, as the journal follower says them
        now[0] = second
        say("sbx0", Live(f"[fast] phase jit_compile: {second}s of 1200s budget; last line: compiling"))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "sbx0 [fast] phase jit_compile (after 3.0s in weight_load; budget 1200s)"
    assert [line.split(": ")[1].split("s of")[0] for line in lines[1:]] == ["30", "60", "90", "120", "150", "180"]


def test_a_heartbeat_is_per_host_and_any_line_of_the_host_restarts_it():
    now = [0.0]
    beat = Heartbeat(30, clock=lambda: now[0])
    now[0] = 29.9
    assert not beat.due("a")
    beat.said("a")
    now[0] = 30
    assert beat.due("b") and not beat.due("a") and not beat.due("b")
    now[0] = 59.9
    assert beat.due("a")


def test_on_a_terminal_a_live_line_is_wiped_before_the_console_prints_anything():
    """The line at the bottom was left behind the results table of `inv bench` (the last thing said was Live)."""
    from rich.console import Console

    out = io.StringIO()
    screen = Console(file=out, force_terminal=True, width=80, color_system=None)
    line = LiveLine(out, True, 80)
    line.wiped_by(screen)
    line.show("sbx0 phase bench: 12s of 600s budget")
    screen.print("host  release")
    assert out.getvalue() == "\r\x1b[2Ksbx0 phase bench: 12s of 600s budget\r\x1b[2Khost  release\n"
