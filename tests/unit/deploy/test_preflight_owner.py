"""Who the unit runs the venv's code as (fleet.deploy.preflight.venv_verdict, fleet.host.serverchecks.VenvRun):
a root unit never serves a venv another user may change, and a unit whose user the host lacks never starts."""

from __future__ import annotations

from fleet.deploy.preflight import loaded, venv_verdict
from fleet.host.render import env_file_values, unit_runs
from fleet.host.serverchecks import MARK, VenvRun

REFUSED = "fleet runs nothing of /srv/venv as root: /srv/venv is writable by group team (several users)"


def _run(text: str) -> VenvRun:
    return VenvRun.parse(f"{MARK}\n{text}")


def test_the_hosts_answer_is_read_line_by_line():
    assert _run("yes\n0\n0\n\n\n") == VenvRun(True, "", "", "", 0)
    assert _run("yes\n1000\n0\nops\n1000:1000\n") == VenvRun(True, "1000:1000", "ops", "", 1000)
    assert _run(f"yes\n0\n77\n\n{REFUSED}\n") == VenvRun(True, None, "", REFUSED, 0)
    assert _run("no\n-\n0\n\n\n") == VenvRun(False, "", "", "", None)


def test_garbage_or_no_answer_is_no_owner_and_never_root():
    for text in ("", "SSH-2.0-garbage\n", "yes\n0\n0\n\nroot\n", "yes\n0\n0\n\n1000:1000:9 extra\n",
                 "yes\n0\n0\n\n1000:\n", "yes\n0\n0\n\n\u00b2:1\n"):
        found = _run(text)
        assert found.owner is None and found.said, (text, found)
    # no marker: a host that printed something else, or nothing; never read as an answer (nor as root's)
    for text in ("yes\n0\n0\n\n\n", "Welcome to pve-gpu-03\nyes\n0\n0\n\n\n"):
        assert VenvRun.parse(text).owner is None and VenvRun.parse(text).user_uid is None
    # what a banner printed before the marker is not the answer
    banner = VenvRun.parse(f"Welcome\n{MARK}\nyes\n0\n0\n\n\n")
    assert banner == VenvRun(True, "", "", "", 0)
    assert _run("yes\n0\n1\n\n\n").said == "no answer (exit 1)"


def test_a_root_unit_refuses_a_venv_another_user_owns():
    # before: the deploy went on, and systemd ran ops's python (and every .pth in its venv) as root at each start
    problem = venv_verdict(_run("yes\n0\n0\nops\n1000:1000\n"), "/home/ops/venv/", "root")
    assert problem
    assert problem.startswith("venv /home/ops/venv is ops (uid 1000)'s, and the unit runs as root")
    assert "set serve.user to ops" in problem


def test_a_venv_others_may_change_is_refused_with_the_rules_line():
    problem = venv_verdict(_run(f"yes\n1000\n77\n\n{REFUSED}\n"), "/srv/venv", "ops")
    assert problem == f"venv /srv/venv: {REFUSED}"


def test_a_unit_user_the_host_lacks_is_refused_before_anything_changes():
    problem = venv_verdict(_run("yes\n-\n0\n\n\n"), "/opt/venv", "sglang")
    assert problem and problem.startswith("serve.user 'sglang' has no account on the host") and "217/USER" in problem


def test_a_venv_runs_as_its_single_owner_or_as_roots_venv_and_never_as_a_third_user():
    assert venv_verdict(_run("yes\n0\n0\n\n\n"), "/opt/venv", "root") is None
    assert venv_verdict(_run("yes\n0\n0\n\n\n"), "/opt/venv", "llm") is None
    assert venv_verdict(_run("yes\n1001\n0\nllm\n1001:1001\n"), "/home/llm/venv", "llm") is None
    # before: said, and the unit started: ops's code ran as llm (its API key, model and GPUs)
    problem = venv_verdict(_run("yes\n1001\n0\nops\n1000:1000\n"), "/home/ops/venv", "llm")
    assert problem and problem.startswith("venv /home/ops/venv is ops (uid 1000)'s, and the unit runs as llm: "
                                          "every start would run that user's code as llm"), problem


def test_a_missing_venv_is_said_as_before():
    problem = venv_verdict(_run("no\n0\n77\n\nfleet runs nothing of /nope as root: no such file\n"), "/nope",
                              "root")
    assert problem and problem.startswith("venv /nope does not exist on the host (no /nope/bin/python)")


def test_a_units_user_and_venv_are_read_from_its_text():
    text = ("[Service]\nType=simple\nUser=llm\nWorkingDirectory=/home/llm\n"
            "ExecStart=/home/llm/venv/bin/python -m sglang.launch_server --port 30000\n")
    assert unit_runs(text) == ("llm", "/home/llm/venv")
    assert unit_runs(text.replace("User=llm\n", "")) == ("root", "/home/llm/venv")  # no User=: root
    assert unit_runs("[Service]\nUser=\nExecStart=\"/opt/a venv/bin/python\" -m x\n") == ("root", "/opt/a venv")
    assert unit_runs("[Service]\nExecStart=-/opt/v/bin/python\n") == ("root", "/opt/v")
    for odd in ("[Service]\nExecStart=/usr/local/sbin/thing\n", "[Service]\nExecStart=python -m x\n",
                "[Service]\nExecStart=\"unbalanced\n", ""):
        assert unit_runs(odd) is None, odd


def test_what_the_units_environment_has_its_python_load_is_judged_with_the_venv():
    # serve.env PYTHONPATH at a user's folder: root imported that user's sitecustomize.py at each start (h-adv14)
    envs = [{"PYTHONPATH": "/home/ops/pp:relative:/opt/lib", "NCCL_P2P_DISABLE": "1"},
            {"LD_PRELOAD": "/home/ops/hook.so /usr/lib/x.so:/home/ops/hook.so", "PYTHONHOME": "/srv/py"}, {}]
    assert loaded(envs) == ("/home/ops/pp", "relative", "/opt/lib", "/srv/py", "/home/ops/hook.so", "/usr/lib/x.so")
    problem = venv_verdict(_run("yes\n0\n0\nops\n1000:1000\n"), "/opt/venv", "root", ("/home/ops/pp",))
    assert problem and problem.startswith("venv /opt/venv with /home/ops/pp (its env) is ops (uid 1000)'s"), problem


def test_a_releases_env_file_is_read_back_as_rendered():
    from fleet.host.render import envfile_quote

    text = "\n".join(f"{k}={envfile_quote(v)}" for k, v in
                     {"PYTHONPATH": "/home/o/p", "ODD": 'a"b\\c$d`e', "EMPTY": ""}.items()) + "\n# note\n"
    assert env_file_values(text) == {"PYTHONPATH": "/home/o/p", "ODD": 'a"b\\c$d`e', "EMPTY": ""}
