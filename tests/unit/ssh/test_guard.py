"""The sandbox guard reads the kernel's routes: a sandbox address passes only while a bridge of this machine
routes it (its fleet is up); with the fleet down the address meets the sandbox ranges' blackhole, or (without
it) the default route out of the machine, and is refused. Recorded: tests/fixtures/routes."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from fleet.errors import GuardError
from fleet.ssh import guard

ROUTES = Path(__file__).resolve().parents[2] / "fixtures/routes/proc_net_route_two_fleets_up_blackholed.txt"


def test_the_most_specific_route_wins_in_the_recorded_table():
    table = ROUTES.read_text()
    assert guard.route_of("172.30.74.10", table) == ("fsbr5", ipaddress.IPv4Network("172.30.74.0/24"))
    assert guard.route_of("172.30.73.10", table) == ("*", ipaddress.IPv4Network("172.30.64.0/20"))
    assert guard.route_of("192.0.2.77", table) == ("eth0", ipaddress.IPv4Network("192.0.2.0/24"))
    assert guard.route_of("8.8.8.8", table) == ("eth0", ipaddress.IPv4Network("0.0.0.0/0"))


def test_an_address_of_a_fleet_that_is_down_is_refused_blackholed_or_not():
    table = ROUTES.read_text()
    assert guard.why_not_up("172.30.75.12", table) is None  # fsbr4 is up
    assert "no sandbox fleet is up there" in (guard.why_not_up("172.30.73.10", table) or "")  # the blackhole
    no_blackhole = "\n".join(line for line in table.splitlines() if not line.startswith("*"))
    assert "no sandbox fleet is up there" in (guard.why_not_up("172.30.73.10", no_blackhole) or "")  # default route


def test_the_guard_refuses_in_one_line_before_anything_is_sent(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEET_SANDBOX_ONLY", "1")
    (tmp_path / "route").write_text(ROUTES.read_text())
    monkeypatch.setattr(guard, "ROUTES", tmp_path / "route")  # the machine's own table is live; this one is fixed
    assert guard.pin("172.30.74.10", "sbx0:") == "172.30.74.10"
    assert guard.pin("127.0.0.1", "lo:") == "127.0.0.1"
    with pytest.raises(GuardError) as refused:
        guard.pin("172.30.73.10", "sbx0:")
    assert str(refused.value) == ("sbx0: 172.30.73.10 refused: FLEET_SANDBOX_ONLY=1 and no sandbox fleet is up "
                                  "there (no bridge of this machine routes it: `inv sandbox.up` its instance); "
                                  "nothing was sent")
