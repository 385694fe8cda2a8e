"""A GPU falls off the bus under the server (the simulator's Xid 79, as on the RTX PRO 6000 / 5090 hosts of
open-gpu-kernel-modules 1151 and 1159): the deploy ends its ladder on GPU_FAULT instead of walking the flags
(the previous release, put back, cannot start on the lost GPU either), the probe shows the Xid events and the
lost GPU, and the next deploy to the host changes nothing."""

from __future__ import annotations

from faultkit import current, rung
from fleetcli import inv_json, llama_playbook, sh

HOST = "sbx0"


def test_a_gpu_off_the_bus_mid_deploy_ends_the_ladder_and_the_next_deploy_changes_nothing(
        sandbox, sandbox_inventory, tmp_path):
    base = current(sandbox_inventory, HOST)  # whatever the fleet's earlier tests left (or none)
    book = llama_playbook(tmp_path, rung("xid", SGLANG_SIM_XID="79:0") + rung("would-serve"), name="llama-gpu")
    try:
        rc, data, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force")
        # the previous release (if any) is put back, and cannot start either: its GPU is gone, as on real hardware
        assert rc != 0 and data["status"] == "failed", (data.get("error"), err[-3000:])
        [attempt] = data["attempts"]  # the second rung, whose flags would have served, is never tried
        assert attempt["rung"] == "xid" and attempt["outcome"] == "GPU_FAULT"
        assert "Xid 79" in attempt["evidence"] and "unspecified launch failure" in attempt["evidence"]
        assert current(sandbox_inventory, HOST) == base

        rc, facts, err = inv_json(sandbox, "probe", "--host", HOST)
        [host] = facts if isinstance(facts, list) else facts["hosts"]
        assert [g["pci_bus_id"] for g in host["lost_gpus"]] == ["0000:01:00"]
        assert {(e["code"], e["pci"]) for e in host["kernel_log"]["events"]} == {(79, "0000:01:00"),
                                                                                 (154, "0000:01:00")}
        assert host["kernel_log"]["source"] == "dmesg"

        rc, again, err = inv_json(sandbox, "deploy", "--host", HOST, "--playbook", str(book), "--force")
        assert rc != 0 and again["status"] == "failed"
        assert [(a["rung"], a["outcome"]) for a in again["attempts"]] == [("-", "GPU_FAULT")]
        assert "cannot be opened" in again["attempts"][0]["evidence"]
        assert current(sandbox_inventory, HOST) == base
    finally:  # the GPU is back (as after a reboot: /run is a tmpfs)
        sh(sandbox_inventory, HOST, "rm -f /run/fleet-sim/kmsg /run/fleet-sim/lost")
