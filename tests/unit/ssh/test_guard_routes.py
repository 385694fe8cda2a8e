"""A sandbox address routed out of the machine (not by a sandbox bridge) is refused (found by review, issue 45)."""

from __future__ import annotations

from pathlib import Path

from fleet.ssh import guard

HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
DEFAULT = "eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
BLACKHOLE = "*\t00401EAC\t00000000\t0201\t0\t0\t0\t00F0FFFF\t0\t0\t0\n"  # 172.30.64.0/20, sandbox/blackhole.py
VIA_GATEWAY = "eth0\t004D1EAC\t0100000A\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"  # 172.30.77.0/24 via 10.0.0.1


def test_a_sandbox_range_routed_through_a_gateway_is_not_up():
    down = HEADER + DEFAULT + BLACKHOLE  # the fleet down: refused
    assert guard.why_not_up("172.30.77.5", down)  # not an instance's address
    # a VPN's (or anyone's) /24 into the sandbox range, out through eth0's gateway: no fleet bridge routes it
    assert guard.why_not_up("172.30.77.5", down + VIA_GATEWAY)  # not an instance's address


def test_the_guard_knows_the_sandbox_bridges_by_their_name():
    text = (Path(__file__).parents[3] / "sandbox" / "config.py").read_text()
    assert f'return f"{guard.BRIDGE_PREFIX}{{self.index}}"' in text  # sandbox/config.py's SandboxConfig.bridge
