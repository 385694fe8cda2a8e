"""The fault suite's hooks act only under FLEET_SANDBOX_ONLY=1 (issue 46, finding 8: an undocumented override; the
eighteenth newcomer's hour): FLEET_FAULT_AT, FLEET_FAULT_KILL_AT and FLEET_FAULT_FILL, read by every fleet process,
failed, dropped or SIGKILLed a real deploy at their step, or ran their shell command on a real host, when left in a
shell (a CI job that ran the fault suite, a copied environment)."""

from __future__ import annotations

from fleet import faulthook


def test_the_hooks_are_inert_outside_the_sandbox(monkeypatch, tmp_path):
    monkeypatch.delenv("FLEET_SANDBOX_ONLY", raising=False)
    monkeypatch.setenv(faulthook.AT, "1:fail")
    monkeypatch.setenv(faulthook.TRACE, str(tmp_path / "trace"))
    monkeypatch.setenv(faulthook.ENV, "opened")
    faulthook.number_from_one()
    assert not faulthook.active() and not faulthook.armed("opened")
    assert faulthook.remote_step(lambda: "step") is None
    assert not (tmp_path / "trace").exists()


def test_under_the_sandbox_guard_they_act_as_the_fault_suite_needs(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "1")
    monkeypatch.setenv(faulthook.AT, "1:fail")
    monkeypatch.delenv(faulthook.TRACE, raising=False)
    monkeypatch.setenv(faulthook.ENV, "opened")
    faulthook.number_from_one()
    assert faulthook.active() and faulthook.armed("opened")
    assert faulthook.remote_step(lambda: "step") == "fail"
    faulthook.number_from_one()
