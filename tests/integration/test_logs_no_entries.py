"""`inv logs --since` a time still ahead, on a real journal: journalctl's `-- No entries --` is no log line; the
host with no lines is said once, on stderr."""

from __future__ import annotations

import json

from fleetcli import inv


def test_a_span_still_ahead_prints_no_line_and_says_so_once_on_stderr(sandbox):
    proc = inv(sandbox, "logs", "--host", "sbx3", "--since", "2099-01-01")
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr  # fails before: "-- No entries --" as a line
    assert proc.stderr.count("no journal lines") == 1 and "no journal lines since 2099-01-01: sbx3" in proc.stderr
    proc = inv(sandbox, "logs", "--host", "sbx3", "--since", "2099-01-01", "--json")
    assert (proc.returncode, proc.stdout) == (0, "") and "No entries" not in proc.stdout + proc.stderr
    assert all(json.loads(line) for line in proc.stdout.splitlines())
