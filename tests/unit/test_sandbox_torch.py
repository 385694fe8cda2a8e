"""The simulated torch (sandbox/sim/pkgs/torch) runs fleet's P2P data check as real torch does: int32 arithmetic
wraps as torch 2.11 on an H100 computed it (tests/fixtures/gpu-health/p2p_check_values_h100.json, recorded on a
lent H100), and peer access is what the profile's `nvidia-smi topo -p2p r` says. Run over the stand-in nvidia-smi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.host import p2pcheck
from fleet.host import programs as hostside

REPO = Path(__file__).resolve().parents[2]
RECORDED = json.loads((REPO / "tests/fixtures/gpu-health/p2p_check_values_h100.json").read_text())


def _python(code: str, profile: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{REPO / 'sandbox/standins'}:{os.environ['PATH']}",
           "FLEET_SANDBOX_PROFILE": str(REPO / "sandbox/profiles" / profile),
           "PYTHONPATH": str(REPO / "sandbox/sim/pkgs")}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=env)


def test_the_checks_int32_values_are_what_real_torch_computed():
    code = f"import json, torch; t = {RECORDED['expr']}; print(json.dumps(t.tolist()))"
    done = _python(code, "h100-sxm-x8")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == RECORDED["values"]


@pytest.mark.parametrize(("profile", "peer"), [("h100-sxm-x8", True), ("rtx-pro-6000-x8-proxmox", False)])
def test_fleets_check_copies_every_pair_with_peer_access_as_the_profile_says(profile, peer):
    done = _python(hostside.text("p2p_check.py"), profile, "1")
    check = p2pcheck.parse(done.stdout, done.returncode)
    assert (check.verdict, check.gpus, len(check.pairs)) == ("ok", 8, 56), (check, done.stderr)
    assert {p.peer_access for p in check.pairs} == {peer}
