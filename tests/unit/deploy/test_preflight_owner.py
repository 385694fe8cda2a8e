"""Who the unit runs the venv's code as (fleet.deploy.preflight.venv_verdict, fleet.host.serverchecks.VenvRun):
a root unit never serves a venv another user may change, and a unit whose user the host lacks never starts."""

from __future__ import annotations

from fleet.deploy.preflight import venv_verdict
from fleet.host.serverchecks import VenvRun

REFUSED = "fleet runs nothing of /srv/venv as root: /srv/venv is writable by group team (several users)"


def _run(text: str) -> VenvRun:
    return VenvRun.parse(text)


def test_the_hosts_answer_is_read_line_by_line():
    assert _run("yes\n0\n0\n\n\n") == VenvRun(True, "", "", "", 0)
    assert _run("yes\n1000\n0\nops\n1000:1000\n") == VenvRun(True, "1000:1000", "ops", "", 1000)
    assert _run(f"yes\n0\n77\n\n{REFUSED}\n") == VenvRun(True, None, "", REFUSED, 0)
    assert _run("no\n-\n0\n\n\n") == VenvRun(False, "", "", "", None)


def test_garbage_or_no_answer_is_no_owner_and_never_root():
    for text in ("", "SSH-2.0-garbage\n", "yes\n0\n0\n\nroot\n", "yes\n0\n0\n\n1000:1000:9 extra\n"):
        found = _run(text)
        assert found.owner is None and found.said, (text, found)
    assert _run("yes\n0\n1\n\n\n").said == "no answer (exit 1)"


def test_a_root_unit_refuses_a_venv_another_user_owns():
    # before: the deploy went on, and systemd ran ops's python (and every .pth in its venv) as root at each start
    problem, warning = venv_verdict(_run("yes\n0\n0\nops\n1000:1000\n"), "/home/ops/venv/", "root")
    assert problem and warning is None
    assert problem.startswith("venv /home/ops/venv is ops (uid 1000)'s, and the unit runs as root")
    assert "set serve.user to ops" in problem


def test_a_venv_others_may_change_is_refused_with_the_rules_line():
    problem, _ = venv_verdict(_run(f"yes\n1000\n77\n\n{REFUSED}\n"), "/srv/venv", "ops")
    assert problem == f"venv /srv/venv: {REFUSED}"


def test_a_unit_user_the_host_lacks_is_refused_before_anything_changes():
    problem, _ = venv_verdict(_run("yes\n-\n0\n\n\n"), "/opt/venv", "sglang")
    assert problem and problem.startswith("serve.user 'sglang' has no account on the host") and "217/USER" in problem


def test_a_venv_of_root_or_of_the_units_user_passes_and_another_users_is_said():
    assert venv_verdict(_run("yes\n0\n0\n\n\n"), "/opt/venv", "root") == (None, None)
    assert venv_verdict(_run("yes\n0\n0\n\n\n"), "/opt/venv", "llm") == (None, None)
    assert venv_verdict(_run("yes\n1001\n0\nllm\n1001:1001\n"), "/home/llm/venv", "llm") == (None, None)
    problem, warning = venv_verdict(_run("yes\n1001\n0\nops\n1000:1000\n"), "/home/ops/venv", "llm")
    assert problem is None and warning == ("venv /home/ops/venv is ops (uid 1000)'s, and the unit runs as llm: "
                                           "that user's code runs as llm at every start")


def test_a_missing_venv_is_said_as_before():
    problem, _ = venv_verdict(_run("no\n0\n77\n\nfleet runs nothing of /nope as root: no such file\n"), "/nope",
                              "root")
    assert problem and problem.startswith("venv /nope does not exist on the host (no /nope/bin/python)")
