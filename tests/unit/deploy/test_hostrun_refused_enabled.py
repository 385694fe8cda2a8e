"""Found by review (h-adv16, of 8788d47..f7fb7f0): a unit a dead or failed run stopped that the owner rule now
refuses is left stopped (f7fb7f0), said as `was stopped and starting it again failed: the owner rule refuses it`.
Fleet enabled it with its release, so the next boot (a power cut, a kernel update) starts it as installed: root
running the user's code after all. The note never said so; a tired operator read `left stopped` as safe."""

from __future__ import annotations

from fakesession import FakeSession

from fleet.deploy import hostrun, restore
from fleet.host.releases import STOPPED_MARK
from fleet.progress import quiet


def answer(enabled: str):
    def reply(command: str) -> tuple[int, str]:
        if command.startswith("systemctl show"):
            return 0, "ActiveState=inactive\n"
        if "is-enabled" in command:
            return 0, enabled + "\n"
        return 0, ""
    return reply


def recovered(monkeypatch, enabled: str) -> list[str]:
    monkeypatch.setattr(restore, "installed_problem", lambda s, unit: "venv /v is fleet (uid 1000)'s")
    s = FakeSession(answer=answer(enabled), files={STOPPED_MARK: b'{"units": ["sglang"]}'})
    with hostrun.host_run(s.host, None, "recover", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
        notes = run.recovered
    assert not any(c.startswith("systemctl start") for c in s.sent) and STOPPED_MARK in s.files
    return notes


def test_a_refused_unit_left_stopped_that_a_boot_would_start_says_so(monkeypatch):
    [note] = [n for n in recovered(monkeypatch, "enabled") if "owner rule" in n]
    assert "still enabled" in note and "systemctl disable sglang" in note  # before: silent


def test_a_refused_unit_that_is_not_enabled_says_nothing_more(monkeypatch):
    [note] = [n for n in recovered(monkeypatch, "disabled") if "owner rule" in n]
    assert "enabled" not in note
