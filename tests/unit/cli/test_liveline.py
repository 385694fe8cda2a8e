"""Where a long step stands (fleet.progress.Live): drawn in place on a terminal (fleet.cli.liveline), dropped
where the output is not one (--json's stderr lines, a pipe), while each phase's own line is always printed."""

from __future__ import annotations

import io

from fleet.cli import deploy as deploy_cmd
from fleet.cli.liveline import LiveLine
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
