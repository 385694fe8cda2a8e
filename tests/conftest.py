"""Test-wide setup: the sandbox guard is on, real inventory addresses are blackholed, and sandbox tests
share one 'test' sandbox fleet that is always torn down."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

os.environ["FLEET_SANDBOX_ONLY"] = "1"
os.environ.setdefault("FLEET_SANDBOX_INSTANCE", "test")  # "dev" runs a second suite alongside
# fleet's local state (facts, known-good rungs) of the tests never mixes with the user's .fleet/.
os.environ.setdefault("FLEET_STATE_DIR", tempfile.mkdtemp(prefix="fleet-test-state-"))
# nor reads the user's wheelhouse: a test that installs packages: builds its own (sandbox/sim/wheels.py)
os.environ.setdefault("FLEET_WHEELHOUSE", tempfile.mkdtemp(prefix="fleet-test-wheelhouse-"))

# A suite started as a background job of a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and so
# would every `inv` it starts: Python then installs no KeyboardInterrupt, and the Ctrl-C tests would wait forever.
# A handler here is reset to the default in each child, which Python then turns into KeyboardInterrupt again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
PROFILES = ["rtx-pro-6000-x8-proxmox", "h100-sxm-x8", "rtx5090-x2-workstation", "b200-x8"]


@pytest.fixture(scope="module", autouse=True)
def _own_fleet_state(tmp_path_factory):
    """Each test module has fleet state of its own (facts, what the fleet learned): every deploy teaches the fleet
    (issue 39), so one module's deploys would reorder another's ladders (the known winner is tried first), and a
    module would pass alone and fail in the suite."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLEET_STATE_DIR", str(tmp_path_factory.mktemp("fleet-state")))
        yield


def pytest_sessionstart(session):
    if os.geteuid() == 0:
        from sandbox import blackhole

        blackhole.install()


@pytest.fixture(scope="session")
def bare_profile(tmp_path_factory) -> Path:
    """A profile folder made here, not shipped: no systemd-detect-virt, no DMI (any folder must work), and
    P2P that nvidia-smi reports OK but that hangs, as VFIO clique grants do (nccl#2335)."""
    dest = tmp_path_factory.mktemp("profiles") / "bare-2gpu"
    shutil.copytree(REPO / "sandbox/profiles/rtx5090-x2-workstation", dest)
    (dest / "system/systemd-detect-virt.txt").unlink()
    shutil.rmtree(dest / "system/dmi")
    p2p = dest / "nvidia-smi/topo-p2p-r.txt"
    p2p.write_text(p2p.read_text().replace("GNS", "OK"))
    with open(dest / "profile.yaml", "a") as f:
        f.write("p2p_broken: true\n")
    return dest


@pytest.fixture(scope="session")
def _sandbox_session(bare_profile):
    from sandbox.config import config
    from sandbox.hosts import Sandbox

    if os.geteuid() != 0:
        pytest.fail("sandbox tests need root (CI runs as root); a sandbox that cannot start is a failure")
    sb = Sandbox(config(), log=lambda m: None)
    profiles = [*PROFILES, str(bare_profile)]
    try:
        sb.down()  # fresh hosts every session, even after a run that died without tearing down
        sb.up(len(profiles), profiles)
        yield sb, profiles
    finally:
        sb.down()


@pytest.fixture
def sandbox(_sandbox_session):
    """The test fleet, brought back up if an earlier test took it down (a no-op when it runs)."""
    sb, profiles = _sandbox_session
    sb.up(len(profiles), profiles)
    return sb


@pytest.fixture
def sandbox_inventory(sandbox):
    from fleet import inventory

    return inventory.load(sandbox.cfg.inventory_path)
