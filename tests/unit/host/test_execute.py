"""`inv exec --timeout`: a positive, finite number of seconds, refused in one line naming the option."""

from __future__ import annotations

import pytest

from fleet.errors import InputError
from fleet.host import execute, programs


@pytest.mark.parametrize("bad", ["0", "-1", "soon", "inf", "nan", "1e999", "1e300", "86401"])
def test_a_timeout_is_a_positive_finite_number_of_seconds(bad):
    with pytest.raises(InputError, match=r"^--timeout '"):
        execute.parse_timeout(bad)


def test_no_timeout_is_the_finite_default():
    assert execute.parse_timeout(None) == execute.parse_timeout("") == execute.DEFAULT_TIMEOUT_S == 120
    assert execute.parse_timeout("0.5") == 0.5


def test_the_report_says_how_the_host_ended_the_command_from_exec_sh_own_line():
    assert execute.ended(124, "") == "everything it started, in its own systemd scope, sent TERM"
    assert execute.ended(137, "out\n") == ("everything it started, in its own systemd scope, sent TERM, then KILL 5s "
                                           "later")
    group_only = next(line for line in programs.text("exec.sh").splitlines() if execute.GROUP_ONLY in line)
    said = group_only.split('"')[1]  # the line exec.sh writes on a host without a systemd scope
    assert execute.ended(124, f"x\n{said}\n") == ("its process group sent TERM by timeout(1); this host has no "
                                                  "systemd scope for what left it")
