"""Found by review: a recover whose plan is a reboot from the start (a driver that asks for a reboot, a GPU off the
bus): no GPU reset ran, so no stop mark names the unit; the lock is kept through the reboot."""
from __future__ import annotations

import pytest
from test_recover_points import HOST, KINDS, Machine, Session, healthy, no_pause

from fleet.errors import FleetError
from fleet.host.facts import Gpu, HostFacts, UnitState
from fleet.host.gpuhealth import GpuHealth
from fleet.host.session import BOOT_ID
from fleet.multihost import recover as rec
from fleet.ssh.connect import ConnectOptions


class Wants(Session):
    def probe(self) -> HostFacts:
        self.machine.step("probe", self)
        facts = (HostFacts(host="h1", address="a", gpus=[Gpu(index=0, pci_bus_id="00000000:01:00.0",
                                                             health=GpuHealth(recovery_action="reboot"))])
                 if self.machine.boot == 1 else healthy())
        return facts.model_copy(update={"unit": UnitState(name="sglang", unit_file_state="disabled",
                                        active_state="active" if self.machine.active else "inactive")})


def go(machine):
    return rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Wants(machine))


@pytest.mark.parametrize("kind", KINDS)
def test_direct_reboot_any_fault_then_next_recover(kind):
    clean = Machine(refuse=False)
    go(clean)
    assert "systemctl reboot" in clean.steps and clean.active and not clean.locked
    broken = []
    for i, label in enumerate(clean.steps):
        m = Machine(refuse=False, fault=(i, kind))
        try:
            go(m)
        except (FleetError, KeyboardInterrupt):
            pass
        m.fault = None
        try:
            go(m)  # the operator runs recover again
        except FleetError as exc:
            broken.append(f"step {i} ({label}): next recover failed: {exc}")
        if not m.active:
            broken.append(f"step {i} ({label}): after the next recover the unit is stopped (locked={m.locked})")
    assert not broken, "\n".join(broken)


def test_host_back_after_the_wait_then_next_recover():
    m = Machine(refuse=False)
    late = {"n": 0}

    def sessions(h, o):
        if m.boot > 1 and late["n"] < 3:  # the new boot answers only after recover gave up waiting
            late["n"] += 1
            raise FleetError("h1: connection refused")
        return Wants(m)
    with pytest.raises(FleetError) as first:
        rec.recover(HOST, ConnectOptions(), None, wait_s=0.0, sleep=no_pause, sessions=sessions)
    assert "\n" not in str(first.value)  # one line
    late["n"] = 99
    result = rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=sessions)
    assert result.ok and not m.locked
    assert m.active, "the host serves nothing: the unit ran before the reboot and nothing started it"


class StartFails(Machine):
    def answer(self, session, command):
        if command.startswith("systemctl start"):
            self.steps.append(command)
            return 1, "Job for sglang.service failed because the control process exited with error code."
        return super().answer(session, command)


def test_a_reboot_whose_unit_will_not_start_again_is_not_ok():
    m = StartFails(refuse=False)
    result = go(m)
    assert not m.active
    assert not result.ok, "recover says ok (exit 0) while the unit it stopped runs no more"


def test_a_dead_runs_unit_that_will_not_start_is_not_ok():
    m = StartFails(refuse=False)
    m.boot, m.active = 2, False  # a healthy host; a dead run left its mark naming sglang
    m.files[rec.STOPPED_MARK] = b'{"units": ["sglang"], "at": "x"}'
    result = go(m)
    assert not result.ok, "recover says ok (exit 0) while the unit the dead run stopped runs no more"


class SlowReboot(Machine):
    """`systemctl reboot` is accepted; the machine goes down only after recover stopped waiting."""
    pending = False

    def answer(self, session, command):
        if command == "systemctl reboot":
            self.steps.append(command)
            self.pending = True
            return 0, ""
        return super().answer(session, command)


def test_a_reboot_slower_than_the_wait_leaves_the_unit_stopped():
    m = SlowReboot(refuse=True)  # the driver refuses the reset: the unit was stopped (mark written), then reboot
    with pytest.raises(FleetError, match="the reboot was accepted but had not happened when the wait ended"):
        rec.recover(HOST, ConnectOptions(), None, wait_s=0.0, sleep=no_pause, sessions=lambda h, o: Session(m))
    assert m.pending and m.active and not m.locked
    m.reboot()  # ... and now the accepted reboot happens
    assert rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause,
                       sessions=lambda h, o: Session(m)).ok
    assert m.active, "the host serves nothing: the mark was removed before the reboot it was written for"


class KilledRead(SlowReboot):
    """`systemctl reboot` is accepted; the host is going down: the next boot-id read is killed (SIGTERM: exit
    143, nothing printed) and the commands after it still run in the old boot, then the machine goes down."""

    def answer(self, session, command):
        if command == BOOT_ID and self.pending:
            self.steps.append(command)
            self.pending = False
            return 143, ""
        return super().answer(session, command)


def test_a_killed_boot_id_read_during_shutdown_is_not_the_new_boot():
    m = KilledRead(refuse=True)  # reset refused: the unit was stopped (mark written), then the reboot
    with pytest.raises(FleetError, match="the reboot was accepted but had not happened when the wait ended"):
        rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Session(m))
    m.reboot()  # the old boot ends now
    again = rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Session(m))
    assert again.ok and m.active, "the host serves nothing: the old boot was taken for the new one (boot id '')"


class Restarting(Machine):
    """recover's `is-active` lands in the stop half of a `systemctl restart` (deactivating); recover's stop then
    cancels the restart's start job, as systemd does."""
    asked = 0

    def answer(self, session, command):
        if "is-active" in command and not self.asked:
            self.asked += 1
            self.steps.append(command)
            return 0, "deactivating"
        return super().answer(session, command)


def test_a_unit_caught_restarting_runs_after_the_gpu_reset():
    m = Restarting(refuse=False)
    result = rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Session(m))
    assert result.ok and m.active, "the unit that was restarting is left stopped after the reset (recover ok)"
