"""fleet.faulthook's fault points: numbered in order, traced with who asked, armed for one step and one kind."""

from __future__ import annotations

import shlex

import pytest

from fleet import faulthook
from fleet.host import kcache, programs
from fleet.ssh import faulty


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    faulthook.number_from_one()
    for name in (faulthook.TRACE, faulthook.AT):
        monkeypatch.delenv(name, raising=False)


def test_inert_without_its_variables_and_never_labels_then():
    def label() -> str:
        raise AssertionError("labelled while inert")

    assert [faulthook.remote_step(label) for _ in range(3)] == [None, None, None]
    assert faulthook._steps == 0


def test_every_step_is_numbered_and_traced_and_only_the_armed_one_faults(tmp_path, monkeypatch):
    trace = tmp_path / "trace"
    monkeypatch.setenv(faulthook.TRACE, str(trace))
    monkeypatch.setenv(faulthook.AT, "2:drop")
    got = [faulthook.remote_step(lambda n=n: f"step {n}") for n in range(1, 4)]
    assert got == [None, "drop", None]
    lines = [line.split("\t") for line in trace.read_text().splitlines()]
    assert [(n, label) for n, _, label in lines] == [("1", "step 1"), ("2", "step 2"), ("3", "step 3")]
    monkeypatch.setenv(faulthook.AT, "4:melt")  # not a kind: nothing happens
    assert faulthook.remote_step(lambda: "x") is None


def test_a_step_is_labelled_by_who_asked_and_what_runs():
    # a shipped program by its name and arguments, never its text; the caller is "?" outside fleet's own code
    assert (faulty.step_label(programs.sh_command("write.sh", "/etc/fleet/sglang.env", "0600"))
            == "?: fleet-write /etc/fleet/sglang.env 0600")
    assert faulty.step_label("systemctl   daemon-reload").endswith(": systemctl daemon-reload")
    assert faulty.step_label("echo 'unbalanced").endswith(": echo 'unbalanced")
    # a python program of any size (kcache.py's text passed 20000 characters): its verb shows (the fault harness
    # selects the warm start's modules step by it)
    done = faulty.step_label(programs.python_command("/root/ml-env/bin/python", "kcache.py", "--mark=/m", "modules"))
    assert done == "?: python --mark=/m modules"
    # run for a server's user: the host's own python3, isolated (-I -S), and the verb still shows, not the user
    as_user = kcache.command("/home/u/venv", "u", "--mark=/m", "modules")
    assert shlex.split(as_user)[3:8] == ["fleet-interpreter", "/usr/bin/python3", "-I", "-S", "-c"]
    assert faulty.step_label(as_user) == "?: python --mark=/m modules"
    # for root too (a unit with no User=): never the venv's bin/python, whoever owns it
    as_root = kcache.command("/home/u/venv", "", "--mark=/m", "modules")
    assert shlex.split(as_root)[3:8] == ["fleet-interpreter", "/usr/bin/python3", "-I", "-S", "-c"]
    assert "/home/u/venv/bin/python" not in as_root and faulty.step_label(as_root) == "?: python --mark=/m modules"
    # a venv's own command as its owner (as_owner.py) is labelled as that command, as it was under as_owner.sh
    owned = programs.as_owner("/v", "/v/bin/python", "-c", "import sglang")
    assert faulty.step_label(owned) == faulty.step_label(shlex.join(["/v/bin/python", "-c", "import sglang"]))
    assert faulty.step_label(owned) == "?: /v/bin/python -c 'import sglang'"
