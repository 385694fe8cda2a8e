"""Fixtures for the simulated sglang/flashinfer stack (see simhost.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from simhost import REPO, SimHost, smi_path

sys.path.insert(0, str(REPO))
from sandbox.sim.install import install  # noqa: E402


@pytest.fixture(scope="session")
def sim_site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("pristine") / "site-packages"
    install(site)
    return site


@pytest.fixture(scope="session")
def smi(tmp_path_factory) -> Path:
    return smi_path(tmp_path_factory.mktemp("smi"))


@pytest.fixture
def make_host(tmp_path, sim_site, smi):
    hosts: list[SimHost] = []

    def make(profile: str = "rtx-pro-6000-x8-proxmox", **switches) -> SimHost:
        host = SimHost(tmp_path / f"host{len(hosts)}", sim_site, profile, smi, switches)
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.cleanup()
