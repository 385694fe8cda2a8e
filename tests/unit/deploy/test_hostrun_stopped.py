"""fleet.deploy.hostrun's stop mark: a unit a run stops outside a release (a GPU reset, a reboot) is named on the
host before it is stopped, so when the controller dies or the link drops before the unit runs again, the next
run under the lock starts it; a run that ends (well or not) removes the mark once the unit runs. A mark the host
holds is read as hostile: only unit names are started."""

from __future__ import annotations

import json

import pytest
from fakesession import FakeSession

from fleet.deploy import hostrun
from fleet.errors import FleetError
from fleet.host.releases import STOPPED_MARK
from fleet.progress import quiet


class Unit:
    """One unit's state on the modelled host, answering the commands the skeleton sends about it."""

    def __init__(self, active: bool = True, start_fails: int = 0) -> None:
        self.active, self.start_fails = active, start_fails

    def answer(self, command: str) -> tuple[int, str]:
        if command.startswith("systemctl is-active"):
            return (0, "active") if self.active else (3, "inactive")
        if command.startswith("systemctl show"):
            return 0, f"ActiveState={'active' if self.active else 'inactive'}\n"
        if command.startswith("systemctl stop"):
            self.active = False
        elif command.startswith("systemctl start"):
            if self.start_fails:
                self.start_fails -= 1
                return 1, "Job for sglang.service failed"
            self.active = True
        return 0, ""


def session(unit: Unit, files: dict[str, bytes] | None = None) -> FakeSession:
    return FakeSession(answer=unit.answer, files=files if files is not None else {})


def test_the_unit_is_named_on_the_host_before_it_is_stopped_and_the_mark_goes_when_the_run_ends():
    unit = Unit()
    s = session(unit)
    with hostrun.host_run(s.host, None, "recover", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
        run.stop_unit("sglang")
        assert json.loads(s.files[STOPPED_MARK])["units"] == ["sglang"]
        assert s.sent.index(f"write {STOPPED_MARK}") < s.sent.index("systemctl stop sglang")
        s.start("sglang")  # the body's promise: it runs again
    assert STOPPED_MARK not in s.files and unit.active


def test_a_run_that_died_after_the_stop_has_its_unit_started_by_the_next_run():
    unit, files = Unit(), {}
    s = session(unit, files)
    run = hostrun.HostRun(s, s.acquire_lock("recover"), None, quiet)
    run.stop_unit("sglang")  # ... and the controller dies here: no settle, no end
    assert not unit.active
    again = session(unit, files)
    with hostrun.host_run(again.host, None, "deploy", unit=None, recover=hostrun.lock_only(quiet),
                          session=again) as nxt:
        assert nxt.recovered == ["after a dead run: sglang was started again (active)"]
    assert unit.active and STOPPED_MARK not in files


def test_a_body_that_fails_after_the_stop_starts_the_unit_and_removes_the_mark():
    unit = Unit(start_fails=1)  # the first start fails: the skeleton tries once more
    s = session(unit)
    with pytest.raises(FleetError) as raised:
        with hostrun.host_run(s.host, None, "recover", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
            run.stop_unit("sglang")
            raise FleetError("h1: nvidia-smi -r refused")
    assert unit.active and STOPPED_MARK not in s.files
    assert str(raised.value) == ("h1: nvidia-smi -r refused; sglang was started again (active); the host lock was "
                                 "released")


def test_a_unit_that_will_not_start_keeps_the_mark_for_the_next_run():
    unit = Unit(start_fails=5)
    s = session(unit)
    with pytest.raises(FleetError) as raised:
        with hostrun.host_run(s.host, None, "recover", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
            run.stop_unit("sglang")
            raise FleetError("h1: reset refused")
    assert "sglang was stopped and starting it again failed" in str(raised.value)
    assert json.loads(s.files[STOPPED_MARK])["units"] == ["sglang"]  # the next run tries again


def test_a_unit_that_did_not_run_is_not_named_and_not_started():
    unit = Unit(active=False)
    s = session(unit)
    with hostrun.host_run(s.host, None, "recover", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
        assert run.stop_unit("sglang") == "inactive"
    assert STOPPED_MARK not in s.files and not unit.active and "systemctl start sglang" not in s.sent


def test_no_answer_from_systemctl_is_not_inactive_and_stops_nothing():
    s = FakeSession(answer=lambda c: (1, "") if "is-active" in c else (0, ""))
    with pytest.raises(FleetError, match="whether sglang runs is unknown; nothing was stopped"):
        with hostrun.host_run(s.host, None, "recover", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
            run.stop_unit("sglang")
    assert "systemctl stop sglang" not in s.sent


@pytest.mark.parametrize("mark", [
    b'{"units": ["sglang; reboot"]}',
    b'{"units": ["../../etc/passwd"]}',
    b'{"units": "sglang"}',
    b'not json at all \x1b[2J',
    b'{"units": [42]}',
])
def test_a_mark_fleet_did_not_write_starts_nothing_and_is_removed(mark):
    unit = Unit(active=False)
    files = {STOPPED_MARK: mark}
    s = session(unit, files)
    with hostrun.host_run(s.host, None, "deploy", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
        [note] = run.recovered
    assert note.startswith("after a dead run: removed a stop mark fleet did not write: ")
    assert "\x1b" not in note and not [c for c in s.sent if c.startswith("systemctl start")]
    assert STOPPED_MARK not in files


def test_after_a_reboot_the_units_that_ran_are_started_before_the_lock_is_released():
    unit, files = Unit(), {}
    s = session(unit, files)
    with hostrun.host_run(s.host, None, "recover", unit=None, recover=hostrun.lock_only(quiet), session=s) as run:
        run.stop_unit("sglang")
        lock = run.keep_lock_through_reboot()
    assert "unlock" not in s.sent and STOPPED_MARK in files
    booted = session(unit, files)  # the new boot: fleet's unit is not enabled, so nothing started it
    said = hostrun.release_after_reboot(booted, lock, ["sglang"])
    assert said == ["sglang was started again (active)"] and unit.active and STOPPED_MARK not in files
    assert booted.sent.index("systemctl start sglang") < booted.sent.index("unlock")
