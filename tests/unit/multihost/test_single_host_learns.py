"""A plain `inv deploy --host H` (fleet.multihost.rolling.each, no --serial) teaches the fingerprint's evidence as a
rolling deploy's host does: a fall-back's failed rungs with their classes, and the rung that served; under the
same rules (fleet.deploy.evidence: only hardware/version classes count, seen twice). Before, it learned nothing,
so an operator who deployed host by host never taught the fleet anything. Deployer.run is replaced (no host);
the learning, the file and its rules are the real ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.deploy import fingerprint
from fleet.deploy.ladder import Deployer
from fleet.deploy.results import Attempt, DeployResult
from fleet.host.facts import Gpu, HostFacts, Package
from fleet.inventory import Host
from fleet.multihost import rolling
from fleet.outcomes import DeployStatus
from fleet.playbook import Playbook
from fleet.ssh.connect import ConnectOptions

BOOK = Playbook.model_validate({
    "name": "llama", "model": {"path": "/m"}, "flags": {"tp-size": 2},
    "ladder": [{"name": "greedy", "flags": {"mem-fraction-static": 0.99}}, {"name": "fast"}, {"name": "safe"}]})


def host(name: str) -> Host:
    return Host(name=name, address="10.0.0.2", port=None, user=None, become=False, identity_file=None,
                known_hosts=None, ssh_config=None, proxy_jump=None, venv="/root/ml-env", unit="sglang", groups=(),
                source=Path("hosts.yaml"))


def h100(name: str) -> HostFacts:
    gpu = Gpu(index=0, name="NVIDIA H100 80GB HBM3", compute_cap="9.0", sm=90)
    return HostFacts(host=name, address="10.0.0.2", gpus=[gpu.model_copy(update={"index": i}) for i in range(8)],
                     interconnect="nvlink", p2p="ok", virtualization="none", driver_version="580.95.05",
                     packages={"sglang": Package(version="0.5.9")})


@pytest.fixture
def runs(monkeypatch, tmp_path):
    """Deployer.run answers the next (status, attempts) given, as a probed host would; the calls it got."""
    monkeypatch.setenv("FLEET_STATE_DIR", str(tmp_path / "state"))
    script: list[tuple[DeployStatus, list[tuple[str, str]]]] = []
    calls: list[dict] = []

    def run(self: Deployer, dry_run: bool = False, force: bool = False) -> DeployResult:
        calls.append({"host": self.host.name, "dry_run": dry_run})
        self.facts = h100(self.host.name)
        status, attempts = script.pop(0)
        served = next((r for r, o in attempts if o == "READY"), None) if status == DeployStatus.OK else None
        return DeployResult(self.host.name, status, release="r1" if served else None,
                            config={"rung": served} if served else {},
                            attempts=[Attempt(r, o, "evidence", 1.0) for r, o in attempts])

    monkeypatch.setattr(Deployer, "run", run)
    (tmp_path / "llama.yaml").write_text("name: llama\n")
    monkeypatch.chdir(tmp_path)
    return script, calls


def deploy(name: str, dry_run: bool = False) -> tuple[DeployResult, list[str]]:
    said: list[str] = []
    (result,) = rolling.each([host(name)], BOOK, Path("llama.yaml"), ConnectOptions(), {},
                             lambda h: said.append, dry_run=dry_run)
    assert result.error is None, result.error
    return result, said


def entry() -> dict:
    (only,) = json.loads(fingerprint.path().read_text())["entries"].values()
    return only


def test_a_single_host_deploy_learns_its_failed_rung_and_the_rung_that_served(runs):
    script, _ = runs
    script.append((DeployStatus.OK, [("greedy", "CUDA_OOM"), ("fast", "READY")]))
    result, said = deploy("sbx1")
    assert result.status == DeployStatus.OK
    assert any(m.startswith("remembered rung fast as known-good for fingerprint") for m in said), said
    e = entry()
    assert e["rung"] == "fast" and e["rungs"]["fast"]["hosts"]["sbx1"]["served"] == 1
    assert e["rungs"]["greedy"]["hosts"]["sbx1"]["failures"] == {"CUDA_OOM": 1}
    assert e["failed"]["greedy"]["skipped"] is False  # seen once: not yet evidence
    # the next deploy of an identical host tries it again, before the known-good rung
    order, skipped = fingerprint.arrange(BOOK, h100("sbx5"), list(BOOK.ladder), lambda m: None)
    assert [r.name for r in order][:2] == ["greedy", "fast"] and skipped == []


def test_the_same_hardware_class_seen_twice_by_single_host_deploys_skips_the_rung(runs):
    script, _ = runs
    script += [(DeployStatus.OK, [("greedy", "CUDA_OOM"), ("fast", "READY")])] * 2
    deploy("sbx1")
    deploy("sbx5")
    order, skipped = fingerprint.arrange(BOOK, h100("sbx9"), list(BOOK.ladder), lambda m: None)
    assert [r.name for r in order] == ["fast", "safe"]
    assert [r for r, _ in skipped] == ["greedy"] and "CUDA_OOM, seen 2x on 2 hosts: sbx1, sbx5" in skipped[0][1]


def test_a_rolled_back_single_host_deploy_learns_its_failures_and_host_local_ones_never_count(runs):
    script, _ = runs
    script += [(DeployStatus.ROLLED_BACK, [("greedy", "HANG"), ("fast", "INSTALL_FAILED")])] * 3
    for _ in range(3):
        result, said = deploy("sbx1")
        assert result.status == DeployStatus.ROLLED_BACK
        assert any(m.startswith("remembered this deploy's failures for fingerprint") for m in said), said
    e = entry()
    assert e["rungs"]["greedy"]["hosts"]["sbx1"]["failures"] == {"HANG": 3}
    assert e["rungs"]["fast"]["hosts"]["sbx1"]["failures"] == {"INSTALL_FAILED": 3}
    order, skipped = fingerprint.arrange(BOOK, h100("sbx1"), list(BOOK.ladder), lambda m: None)
    assert [r.name for r in order] == ["greedy", "fast", "safe"] and skipped == []  # hangs and full disks: never


def test_a_dry_run_and_an_unchanged_deploy_learn_nothing(runs):
    script, calls = runs
    script += [(DeployStatus.DRY_RUN, [("greedy", "CUDA_OOM")]), (DeployStatus.UNCHANGED, [])]
    deploy("sbx1", dry_run=True)
    deploy("sbx1")
    assert [c["dry_run"] for c in calls] == [True, False]
    assert not fingerprint.path().exists()
