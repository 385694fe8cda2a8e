"""`inv exec --timeout` on sandbox hosts: at the deadline the command is ended on the host (its whole process
group), and the report says so; a retry never finds the first run still going."""

from __future__ import annotations

import json

from fleetcli import inv_at, sh

HOST = "sbx0"
LEFT = "pgrep -f 'sleep 471[0-9]' || true"  # what is left of the commands below (pgrep never matches itself)


def exec_json(sandbox, *args):
    proc = inv_at(sandbox.cfg.inventory_path, "exec", "-H", HOST, "--json", *args)
    [row] = json.loads(proc.stdout)["hosts"]
    return proc.returncode, row


def test_a_command_past_its_timeout_is_ended_on_the_host_with_what_it_started(sandbox, sandbox_inventory):
    try:
        rc, row = exec_json(sandbox, "--timeout", "2", "--cmd", "sleep 4711 & sleep 4712")
        assert rc == 1 and not row["ok"], row
        assert row["error"] == (f"{HOST}: `sleep 4711 & sleep 4712` did not finish within 2s: ended on the host "
                                "(its process group sent TERM by timeout(1))")
        assert row["seconds"] < 2 + 5, row
        assert sh(sandbox_inventory, HOST, LEFT).strip() == ""  # neither the command nor its background child
    finally:
        sh(sandbox_inventory, HOST, "pkill -f 'sleep 471[0-9]' || true")


def test_a_command_that_ignores_term_is_killed_and_the_report_says_so(sandbox, sandbox_inventory):
    try:
        rc, row = exec_json(sandbox, "--timeout", "1", "--cmd", "trap '' TERM; sleep 4713; echo survived")
        assert rc == 1 and "ended on the host (its process group sent TERM, then KILL 5s later" in row["error"], row
        assert sh(sandbox_inventory, HOST, LEFT).strip() == ""
    finally:
        sh(sandbox_inventory, HOST, "pkill -f 'sleep 471[0-9]' || true")


def test_a_command_within_its_timeout_answers_as_before(sandbox):
    rc, row = exec_json(sandbox, "--timeout", "5", "--cmd", "echo $((6 * 7)); exit 3")
    assert (rc, row["exit"], row["stdout"], row["error"]) == (1, 3, "42\n", None), row
