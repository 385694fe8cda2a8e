"""The hostile-host suite: in-process SSH servers (hostkit.py), no sandbox. A healthy host answers the probe
with what a real profile's machine prints (assembled from sandbox/profiles by tests/unit/host)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "host"))

from test_probe_profiles import PROFILES, assemble  # noqa: E402


@pytest.fixture(scope="session")
def healthy_probe() -> bytes:
    return assemble(PROFILES / "rtx-pro-6000-x8-proxmox").encode()
