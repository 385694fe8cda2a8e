"""--host-timeout against a playbook's phase budgets (issue 46, findings 5 and 8; the eighteenth newcomer's hour): on
the sandbox, `inv deploy --host-timeout 4` printed `phase weight_load (... budget 1800s)` and then gave the host up
(`abandoned`) 0.1 s after it said READY; which deadline wins was said nowhere. A rollout now says it first."""

from __future__ import annotations

from fleet.multihost.rollout import host_timeout_note
from fleet.playbook import Budgets


def test_a_host_timeout_shorter_than_a_start_says_it_wins_and_over_which_phases():
    assert host_timeout_note(1000, Budgets()) == (
        "--host-timeout 1000s wins over the playbook's budgets: a host still deploying then is given up on mid-phase, "
        "whatever its phase's budget (a start may take 6120s; longer than it alone: weight_load 1800s, jit_compile "
        "1200s, autotune 1800s)")


def test_one_longer_than_every_phase_together_or_none_says_nothing():
    assert host_timeout_note(7200, Budgets()) is None
    assert host_timeout_note(None, Budgets()) is None
