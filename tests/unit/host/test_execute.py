"""`inv exec --timeout`: a positive, finite number of seconds, refused in one line naming the option."""

from __future__ import annotations

import pytest

from fleet.errors import InputError
from fleet.host import execute, programs


@pytest.mark.parametrize("bad", ["0", "-1", "soon", "inf", "nan", "1e999", "1e300", "86401", "0.00001", "1e-4"])
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
    assert execute.ended(124, f"{said}\nx\n") == ("its process group sent TERM by timeout(1); this host has no "
                                                  "systemd scope for what left it")


def test_the_deadline_the_host_is_given_is_a_plain_decimal():
    # the review: `inv exec --timeout 0.00001` gave exec.sh '1e-05', which systemd-run's RuntimeMaxSec refuses
    with pytest.raises(InputError, match=r"^--timeout '0.00001': at least 0.001 seconds \(a millisecond\)$"):
        execute.parse_timeout("0.00001")
    assert [execute.seconds(execute.parse_timeout(t)) for t in ("0.001", "1e-3", "2.5", "120", "86400", "1e2")] == [
        "0.001", "0.001", "2.5", "120", "86400", "100"]


def test_only_exec_sh_own_first_line_says_the_host_had_no_scope():
    # the review: a command that printed exec.sh's words on its own stderr changed what the report said
    group_only = next(line for line in programs.text("exec.sh").splitlines() if execute.GROUP_ONLY in line)
    said = group_only.split('"')[1]
    assert execute.ended(124, f"warning: x\n{said}\n").startswith("everything it started, in its own systemd scope")
    assert execute.ended(137, f"{said}\nwarning: x\n{said}\n").startswith("its process group")
