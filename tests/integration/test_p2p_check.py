"""`inv probe --p2p-check` on sandbox hosts over real SSH: fleet's check (fleet/host/programs/p2p_check.py, what it
runs on a real host) with the simulated torch, whose GPUs reach each other peer to peer as the host's profile says
(`nvidia-smi topo -p2p r`). It exited 1 everywhere: the simulated torch had no `arange`."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from fleetcli import REPO, inv_at

PROFILES = REPO / "sandbox" / "profiles"


def _peers_in(profile: str) -> dict[tuple[int, int], bool]:
    """Which ordered GPU pairs the profile's recorded `topo -p2p r` says are OK (the test reads it; fleet never)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", (PROFILES / profile / "nvidia-smi" / "topo-p2p-r.txt").read_text())
    rows = [c for c in map(str.split, text.splitlines()) if c and re.fullmatch(r"GPU\d+", c[0]) and "X" in c]
    return {(int(r[0][3:]), j): cell == "OK" for r in rows for j, cell in enumerate(r[1:]) if cell != "X"}


def _profiles(sandbox) -> dict[str, str]:
    data = yaml.safe_load(sandbox.cfg.inventory_path.read_text())
    return {name: spec["vars"]["profile"] for name, spec in data["hosts"].items()}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("profile", ["rtx-pro-6000-x8-proxmox", "h100-sxm-x8"])
def test_the_p2p_check_copies_every_pair_as_the_profile_allows(sandbox, profile):
    host = next(name for name, p in _profiles(sandbox).items() if p == profile)
    expected = _peers_in(profile)
    proc = inv_at(sandbox.cfg.inventory_path, "probe", "-H", host, "--p2p-check", "--json")
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    check = json.loads(proc.stdout)["hosts"][0]["p2p_check"]
    assert (check["verdict"], check["gpus"], check["error"]) == ("ok", 8, None), check
    assert {(p["src"], p["dst"]): p["peer_access"] for p in check["pairs"]} == expected
    assert all(p["mismatched"] == 0 and p["mib"] == 64 for p in check["pairs"])
    assert len(set(expected.values())) == 1  # these two profiles: all pairs or none
    table = inv_at(sandbox.cfg.inventory_path, "probe", "-H", host, "--p2p-check", env={"COLUMNS": "250"})
    how = "all peer to peer" if all(expected.values()) else "no peer access: through host memory"
    assert table.returncode == 0 and f"P2P data check: ok, 56 GPU pairs copied and compared ({how})" in table.stdout
