"""Found by review (h-adv16, of 8788d47..f7fb7f0): recover asked the owner rule of the host's unit only where it ran
(it starts that one again), before anything stops. A reboot or a VM reset starts more: the boot starts every enabled
unit (fleet enables its release's: one that died with the GPU fault, or that the operator stopped as recover's
refusal advises), and recover starts the playbook router's unit again on the new boot. Neither was asked before the
machine went down: the reboot was sent, and the boot (or release_after_reboot) started a unit the rule refuses (the
router's was then left stopped, said only after the reboot). tests/integration/test_owner_boot.py runs the first
end to end."""
from __future__ import annotations

import pytest
from test_recover_points import HOST, Machine, Session, no_pause
from test_recover_reboot_first import Wants
from test_recover_router_host import ROUTER, RouterHost

from fleet.deploy import restore
from fleet.errors import FleetError
from fleet.host.facts import HostFacts, UnitState
from fleet.multihost import recover as rec
from fleet.ssh.connect import ConnectOptions

REFUSED = "venv /v is fleet (uid 1000)'s, and the unit runs as root"


class Enabled(Wants):
    """The unit is enabled (fleet's deploy enables it), whether it runs or not."""

    def probe(self) -> HostFacts:
        facts = super().probe()
        assert facts.unit is not None
        return facts.model_copy(update={"unit": facts.unit.model_copy(update={"unit_file_state": "enabled"})})


def refusing(*units: str):
    return lambda s, unit: REFUSED if unit in units else None


def test_a_reboot_is_refused_where_the_boot_would_start_an_enabled_unit_the_rule_refuses(monkeypatch):
    m = Machine(refuse=False)
    m.active = False  # died with the GPU fault, or stopped by hand as the refusal advised
    monkeypatch.setattr(restore, "installed_problem", refusing("sglang"))
    with pytest.raises(FleetError) as err:
        rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Enabled(m))
    assert "systemctl reboot" not in m.steps, m.steps  # before: rebooted, the boot started the unit as root
    assert "owner rule" in str(err.value) and "systemctl disable --now sglang" in str(err.value)
    assert not m.locked


def test_a_disabled_unit_that_does_not_run_is_no_reason_to_refuse_a_reboot(monkeypatch):
    m = Machine(refuse=False)
    m.active = False
    monkeypatch.setattr(restore, "installed_problem", refusing("sglang"))
    result = rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Wants(m))
    assert "systemctl reboot" in m.steps and not m.active and result.faults_after == []


def test_a_reboot_of_the_router_host_is_refused_before_it_where_the_rule_refuses_the_router(monkeypatch):
    m = RouterHost(refuse=False)
    monkeypatch.setattr(restore, "installed_problem", refusing(ROUTER))
    with pytest.raises(FleetError) as err:
        rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: Wants(m),
                    router=ROUTER)
    assert "systemctl reboot" not in m.steps, m.steps  # before: rebooted, the router then left stopped
    assert m.router and m.active and not m.locked
    assert "owner rule" in str(err.value) and ROUTER in str(err.value)


def test_a_refused_gpu_reset_turning_into_a_reboot_asks_for_the_enabled_unit_first(monkeypatch):
    m = Machine(refuse=True)  # the driver refuses the reset: recover would reboot instead
    m.active = False

    class EnabledReset(Session):
        def probe(self) -> HostFacts:
            facts = super().probe()
            return facts.model_copy(update={"unit": UnitState(name="sglang", unit_file_state="enabled",
                                                              active_state="inactive")})

    monkeypatch.setattr(restore, "installed_problem", refusing("sglang"))
    with pytest.raises(FleetError) as err:
        rec.recover(HOST, ConnectOptions(), None, wait_s=0.05, sleep=no_pause, sessions=lambda h, o: EnabledReset(m))
    assert "systemctl reboot" not in m.steps, m.steps
    assert "no reboot was sent" in str(err.value) and not m.locked
