"""Where a sandbox fleet lives: its state folder, bridge, subnet and inventory file.

Instances run side by side on one machine: `demo` (what `inv sandbox.up` makes), `test` (what the test suite
makes when it runs serially) and `lane0`.. (one per worker when it runs in parallel), so running the tests never
tears down a fleet someone is looking at.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROFILES_DIR = REPO / "sandbox" / "profiles"
STANDINS_DIR = REPO / "sandbox" / "standins"
BOOT_SCRIPT = REPO / "sandbox" / "boot-host.sh"
# Every sandbox subnet is carved from this range, which fleet's guard (FLEET_SANDBOX_ONLY) allows.
SANDBOX_SUPERNET = ipaddress.ip_network("172.30.64.0/20")
HOST_PROFILE_DIR = "/usr/share/fleet-sandbox/profile"
HOST_VENV = "/root/ml-env"

# Other test runs (e.g. colleagues') use "dev".."dev5" alongside "test" without tearing it down; "bench" is
# the benchmarks' own fleet (up to 64 hosts), so a benchmark never replaces a fleet someone is using.
_INSTANCES = {"demo": 0, "test": 1, "dev": 2, "dev2": 3, "dev3": 4, "dev4": 5, "bench": 6, "dev5": 7}
_THIRD_OCTET = {0: 77, 1: 78, 2: 79, 3: 76, 4: 75, 5: 74, 6: 73, 7: 72}  # all inside SANDBOX_SUPERNET
# The parallel suite's lanes: one instance per pytest-xdist worker (tests/conftest.py), lane0.. by default;
# FLEET_SANDBOX_LANES picks others (lane4..lane7), so a second parallel run can go alongside the first.
LANES = tuple(f"lane{i}" for i in range(8))
for _i, _lane in enumerate(LANES):
    _INSTANCES[_lane] = 10 + _i
    _THIRD_OCTET[10 + _i] = 64 + _i


@dataclass(frozen=True)
class SandboxConfig:
    instance: str
    index: int
    home: Path
    inventory_path: Path

    @property
    def bridge(self) -> str:
        return f"fsbr{self.index}"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"172.30.{_THIRD_OCTET[self.index]}.0/24")

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    def address(self, i: int) -> str:
        return str(self.subnet.network_address + 10 + i)

    def netns(self, host: str) -> str:
        return f"fsb{self.index}-{host}"

    def veth(self, i: int) -> str:
        return f"fsb{self.index}h{i}"

    def host_dir(self, host: str) -> Path:
        return self.home / "hosts" / host

    def cgroups(self, host: str) -> list[Path]:
        leaf = f"fleet-sandbox/{self.instance}-{host}"
        return [Path("/sys/fs/cgroup/systemd") / leaf, Path("/sys/fs/cgroup/unified") / leaf]

    @property
    def identity_file(self) -> Path:
        return self.home / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.home / "known_hosts"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"


def config(instance: str | None = None) -> SandboxConfig:
    instance = instance or os.environ.get("FLEET_SANDBOX_INSTANCE", "demo")
    if instance not in _INSTANCES:
        raise ValueError(f"FLEET_SANDBOX_INSTANCE: unknown sandbox instance {instance!r} ({', '.join(_INSTANCES)})")
    home = Path(os.environ.get("FLEET_SANDBOX_HOME", "/var/lib/fleet-sandbox")) / instance
    inventory = REPO / "inventory" / "sandbox.yaml" if instance == "demo" else home / "inventory.yaml"
    return SandboxConfig(instance=instance, index=_INSTANCES[instance], home=home, inventory_path=inventory)
