"""`inv probe` against sandbox hosts of every shipped profile (plus one made-up folder), over real SSH."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import sshutil
import yaml

REPO = Path(__file__).resolve().parents[2]


def inv_probe(sandbox, *args, env=None):
    return subprocess.run([str(REPO / ".venv/bin/inv"), "probe", "-i", str(sandbox.cfg.inventory_path), *args],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_probe_json_reports_every_profile_right(sandbox, tmp_path):
    proc = inv_probe(sandbox, "--json", env={"FLEET_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    hosts = {h["host"]: h for h in json.loads(proc.stdout)["hosts"]}
    assert sorted(hosts) == ["sbx0", "sbx1", "sbx2", "sbx3", "sbx4"]
    seed = hosts["sbx0"]
    assert seed["ok"] and seed["error"] is None
    assert len(seed["gpus"]) == 8
    assert {(g["sm"], g["compute_cap"]) for g in seed["gpus"]} == {(120, "12.0")}
    assert seed["gpus"][3]["memory_total_mib"] == 97887 and seed["gpus"][3]["power_limit_w"] == 600.0
    assert (seed["interconnect"], seed["topology"]["nvlink"]) == ("pcie", False)
    assert {c for row in seed["topology"]["links"] for c in row} == {"X", "PHB"}
    assert {c for row in seed["topology"]["p2p_read"] for c in row} == {"X", "CNS"}
    assert seed["p2p"] == "refused (CNS)"
    assert seed["virtualization"] == "kvm" and seed["arch_family"] == "blackwell-consumer"
    assert (seed["driver_version"], seed["cuda_version"]) == ("580.95.05", "13.0")

    h100, rtx5090, b200 = hosts["sbx1"], hosts["sbx2"], hosts["sbx3"]
    assert (h100["arch_family"], h100["interconnect"], h100["gpus"][0]["sm"]) == ("hopper", "nvlink", 90)
    assert (rtx5090["arch_family"], rtx5090["p2p"], len(rtx5090["gpus"])) == ("blackwell-consumer", "refused (GNS)", 2)
    assert (b200["arch_family"], b200["gpus"][0]["sm"]) == ("blackwell-datacenter", 100)
    assert b200["topology"]["nvlink"] is True

    bare = hosts["sbx4"]  # the made-up profile: no systemd-detect-virt, no DMI
    assert bare["ok"] and bare["virtualization"] is None
    assert any("virt" in w for w in bare["warnings"])
    [saved] = (tmp_path / "facts").glob("*/sbx0@*.json")
    assert json.loads(saved.read_text())["address"] == hosts["sbx0"]["address"]


def test_an_unreachable_host_is_a_row_with_its_error_and_exit_1(sandbox, tmp_path):
    sandbox.cut("sbx3")
    try:
        proc = inv_probe(sandbox, "--json", "--host", "sbx0", "--host", "sbx3",
                         env={"FLEET_STATE_DIR": str(tmp_path)})
    finally:
        sandbox.heal("sbx3")
    assert proc.returncode == 1
    hosts = {h["host"]: h for h in json.loads(proc.stdout)["hosts"]}
    assert hosts["sbx0"]["ok"] is True
    assert hosts["sbx3"]["ok"] is False and "sbx3" in hosts["sbx3"]["error"]
    assert hosts["sbx3"]["gpus"] == []


def test_human_output_has_the_verdict_line(sandbox, tmp_path):
    proc = inv_probe(sandbox, "--host", "sbx0", env={"FLEET_STATE_DIR": str(tmp_path), "COLUMNS": "200"})
    assert proc.returncode == 0
    assert ("8x RTX PRO 6000 Blackwell (SM 12.0), PCIe only (PHB), P2P refused (CNS), "
            "KVM guest (QEMU Q35: Proxmox-style)") in proc.stdout


def test_bad_input_is_exit_2_and_one_line():
    proc = subprocess.run([str(REPO / ".venv/bin/inv"), "probe", "-i", "inventory/hosts.example.yaml", "--group",
                           "no-such-group"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--group no-such-group" in proc.stderr


def test_a_kernel_line_saying_operation_not_permitted_hides_no_xid_on_the_host(sandbox, sandbox_inventory, tmp_path):
    # any process can log these words; the stand-in dmesg prints /run/fleet-sim/kmsg after the profile's log
    planted = ("mkdir -p /run/fleet-sim && printf '%s\\n' '[  800.0] overlayfs: mount: Operation not permitted' "
               "'[  812.1] NVRM: Xid (PCI:0000:01:00): 13, pid=1, Graphics Exception' >> /run/fleet-sim/kmsg")
    sshutil.sh(sandbox_inventory.hosts["sbx0"], planted)
    try:
        proc = inv_probe(sandbox, "--host", "sbx0", "--json", env={"FLEET_STATE_DIR": str(tmp_path)})
        [host] = json.loads(proc.stdout)["hosts"]
        log = host["kernel_log"]
        assert (log["source"], log["problem"]) == ("dmesg", None), log
        assert [(e["pci"], e["code"]) for e in log["events"]] == [("0000:01:00", 13)]
    finally:
        sshutil.sh(sandbox_inventory.hosts["sbx0"], "rm -f /run/fleet-sim/kmsg")


def test_two_inventories_naming_a_host_alike_keep_their_facts_apart(sandbox, tmp_path):
    # site A's sbx0 is the sandbox's sbx0; site B names its own host sbx0 too (the sandbox's sbx1)
    doc = yaml.safe_load(sandbox.cfg.inventory_path.read_text())
    addresses = {}
    for site, real in (("a", "sbx0"), ("b", "sbx1")):
        entry = doc["hosts"][real]
        addresses[site] = entry["address"]
        (tmp_path / site).mkdir()
        (tmp_path / site / "hosts.yaml").write_text(yaml.safe_dump({"defaults": doc["defaults"],
                                                                   "hosts": {"sbx0": entry}}))
    for site in ("a", "b"):
        proc = subprocess.run([str(REPO / ".venv/bin/inv"), "probe", "-i", str(tmp_path / site / "hosts.yaml"),
                               "--json"], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "FLEET_STATE_DIR": str(tmp_path / "state")})
        assert proc.returncode == 0, proc.stderr[-2000:]
    saved = sorted((tmp_path / "state" / "facts").glob("*/*.json"))
    assert len(saved) == 2, saved
    assert sorted(json.loads(p.read_text())["address"] for p in saved) == sorted(addresses.values())
