"""fleet.deploy.boot: what a reboot starts is what serves. Every run that may write a unit ends with the current
release's unit enabled and no other unit it wrote; a run that leaves no current release (a first deploy that
served nothing) leaves its unit disabled; a unit masked by hand is never unmasked."""

from __future__ import annotations

import json

import pytest
from fakesession import FakeSession

from fleet.deploy import boot, hostrun
from fleet.errors import FleetError
from fleet.host.releases import ROUTER_ROOT, Release
from fleet.progress import quiet


def test_the_serving_unit_not_enabled_is_enabled():
    assert boot.plan("sglang", "sglang", {"sglang": "disabled"}) == boot.BootPlan(enable="sglang")


def test_enabled_only_for_this_boot_is_enabled_for_good():
    assert boot.plan("sglang", "sglang", {"sglang": "enabled-runtime"}).enable == "sglang"


def test_an_enabled_serving_unit_is_left_as_it_is():
    assert not boot.plan("sglang", "sglang", {"sglang": "enabled"}).changes


def test_no_current_release_leaves_the_written_unit_disabled():
    """A first deploy that served nothing: its files stay, stopped; a reboot must not start them."""
    assert boot.plan(None, "sglang", {"sglang": "enabled"}) == boot.BootPlan(disable=("sglang",))
    assert not boot.plan(None, "sglang", {"sglang": "disabled"}).changes


def test_a_unit_the_run_wrote_that_no_release_serves_from_is_disabled_beside_the_enable():
    todo = boot.plan("sglang", "sglang-b", {"sglang": "disabled", "sglang-b": "enabled"})
    assert (todo.enable, todo.disable) == ("sglang", ("sglang-b",))


def test_a_masked_unit_is_never_unmasked_and_says_so():
    todo = boot.plan("sglang", "sglang", {"sglang": "masked"})
    assert not todo.changes
    assert "masked" in todo.notes[0] and "will not start after a reboot" in todo.notes[0]


class Host:
    """`current` and the unit's enablement on a modelled host."""

    def __init__(self, current: str | None, state: str) -> None:
        self.current, self.state = current, state

    def answer(self, command: str) -> tuple[int, str]:
        if command.startswith("readlink"):
            return 0, f"releases/{self.current}\n" if self.current else ""
        if "systemctl is-enabled" in command:
            return 0, self.state + "\n"
        if command.startswith("systemctl enable"):
            self.state = "enabled"
        if command.startswith("systemctl disable"):
            self.state = "disabled"
        return 0, ""


def test_a_run_that_writes_the_unit_and_ends_with_nothing_current_leaves_it_disabled():
    """The skeleton settles it at the end of the run, whatever the body was (fails before: no settle)."""
    host = Host(None, "enabled")
    s = FakeSession(answer=host.answer)
    said: list[str] = []
    with hostrun.host_run(s.host, None, "deploy x", unit="sglang", recover=hostrun.lock_only(quiet), session=s,
                          progress=said.append):
        pass
    assert host.state == "disabled"
    assert any("disabled sglang" in line for line in said)


def test_a_run_that_writes_no_unit_never_touches_enablement():
    host = Host(None, "enabled")
    s = FakeSession(answer=host.answer)
    with hostrun.host_run(s.host, None, "bench", unit=None, recover=hostrun.lock_only(quiet), session=s):
        pass
    assert host.state == "enabled" and not any("is-enabled" in c for c in s.sent)


class RouterHost:
    """A router's host: a current router release under /var/lib/fleet/router (whose unit is sglang-router), none
    of the host's own; each unit's enablement."""

    def __init__(self, router_state: str) -> None:
        self.states = {"sglang": "disabled", "sglang-router": router_state}
        release = Release(id="20261205T210000Z-r1", host="h1", playbook="dp", playbook_sha256="0" * 64,
                          created="2026-12-05T21:00:00Z", status="ok", rung="router",
                          files={"/etc/systemd/system/sglang-router.service": {"sha256": "0" * 64, "mode": "0o644"}})
        self.files = {f"{ROUTER_ROOT}/releases/{release.id}/manifest.json": json.dumps(release.to_json()).encode()}
        self.current = release.id

    def answer(self, command: str) -> tuple[int, str]:
        if command.startswith(f"readlink {ROUTER_ROOT}/current"):
            return 0, f"releases/{self.current}\n"
        if command.startswith("readlink"):  # the host's own `current`: none
            return 0, ""
        if "systemctl is-enabled" in command:
            units = command.split("for u in ", 1)[1].split(";", 1)[0].split()
            return 0, "".join(f"{self.states[u]}\n" for u in units)
        for verb, state in (("enable", "enabled"), ("disable", "disabled")):
            if command.startswith(f"systemctl {verb}"):
                self.states[command.split()[-1] if verb == "enable" else command.split()[2]] = state
        return 0, ""


def test_a_router_run_enables_the_unit_of_the_current_router_release_and_leaves_the_servers_alone():
    """The router's run writes no unit of the host's own (`unit=None`): before, nothing settled the router's, so a
    rebooted router's host served nothing to route (fails before: sglang-router stayed disabled)."""
    host = RouterHost("disabled")
    s = FakeSession(answer=host.answer, files=host.files)
    said: list[str] = []
    with hostrun.host_run(s.host, None, "deploy router dp", unit=None, recover=hostrun.lock_only(quiet), session=s,
                          progress=said.append, serving=boot.Serving("sglang-router", ROUTER_ROOT)):
        pass
    assert host.states == {"sglang": "disabled", "sglang-router": "enabled"}
    assert any("enabled sglang-router (it was disabled)" in line for line in said)
    assert not any("drop kept" in c for c in s.sent)  # the host's own kept copies are not the router run's


def test_a_router_run_that_fails_still_leaves_what_serves_enabled():
    """A rollback of the router whose body raised (its target did not serve; what served was put back): the unit
    of the current router release is what a boot starts."""
    host = RouterHost("disabled")
    s = FakeSession(answer=host.answer, files=host.files)
    with pytest.raises(FleetError, match="did not serve"), \
            hostrun.host_run(s.host, None, "rollback router", unit=None, recover=hostrun.lock_only(quiet), session=s,
                             serving=boot.Serving("sglang-router", ROUTER_ROOT)):
        raise FleetError("router release x did not serve")
    assert host.states["sglang-router"] == "enabled"
