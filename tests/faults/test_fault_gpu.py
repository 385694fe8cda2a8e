"""GPU hardware faults on the sandbox. A GPU falls off the bus under the server (the simulator's Xid 79, as on the
RTX PRO 6000 / 5090 hosts of open-gpu-kernel-modules 1151 and 1159): the deploy ends its ladder on GPU_FAULT
instead of walking the flags (the previous release, put back, cannot start on the lost GPU either), the probe
shows the Xid events and the lost GPU, and the next deploy to the host changes nothing. A tune ends the same way
and teaches the fingerprint nothing; a rolling deploy counts the host as failed for --max-fail. `inv recover`
resets a GPU whose driver asks for it (the stand-in nvidia-smi answers -r as driver 580 does), reboots a host
whose GPU is lost or whose reset is refused, and resets or power-cycles a Proxmox guest through a loopback
stand-in of the API, also one SSH cannot reach."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from faultkit import PLAIN, WANTS_RESET, current, inventory_file, managed_digest, rung, serving, wait_for
from fleetcli import inv, inv_at, inv_json, llama_playbook, sh

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


# GPU 0 of the host's profile falls off the bus: the driver's line in the kernel log, nvidia-smi loses it.
LOST = ("b=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0) && s=${b#0000} && s=${s%.0} && "
        "echo \"[ 901.5] NVRM: Xid (PCI:$s): 79, pid=1, GPU has fallen off the bus.\" >> /run/fleet-sim/kmsg && "
        "echo $b >> /run/fleet-sim/lost && echo $s")


def running(inventory, host: str) -> bool:
    """The server runs (or is starting)."""
    return sh(inventory, host, "systemctl is-active sglang; true").strip() in ("active", "activating")


def started_again(ran: bool, enabled: bool = False) -> list[str]:
    """recover's step for a server that ran before the reboot: the boot started it (fleet enables the unit it
    deploys), or recover did (a unit not enabled: an older fleet's, or disabled by hand)."""
    if not ran:
        return []
    return ["sglang came back with the boot (enabled)"] if enabled else ["sglang was started again (active)"]


def enabled(inventory, host: str) -> bool:
    return sh(inventory, host, "systemctl is-enabled sglang 2>/dev/null; true").strip() == "enabled"


def test_recover_reboots_a_host_whose_gpu_fell_off_and_probes_it_healthy(sandbox, sandbox_inventory):
    host = "sbx1"
    bus = sh(sandbox_inventory, host, "mkdir -p /run/fleet-sim && " + LOST).strip()
    rc, plan, err = inv_json(sandbox, "recover", "--host", host, "--dry-run")
    assert rc == 0 and plan["action"] == "reboot" and plan["steps"] == [], err[-2000:]
    assert plan["why"] == f"GPU {bus.lower()} cannot be opened (Unknown Error)"
    ran, on = running(sandbox_inventory, host), enabled(sandbox_inventory, host)  # as earlier tests left it
    rc, done, err = inv_json(sandbox, "recover", "--host", host)
    assert rc == 0 and done["ok"] and done["faults_after"] == [], (done, err[-2000:])
    assert done["steps"] == ["systemctl reboot", *started_again(ran, on), "probed again: no GPU fault"]
    assert running(sandbox_inventory, host) == ran  # the boot started it (enabled), or recover did
    assert sh(sandbox_inventory, host, "test -e /run/fleet-sim/lost || echo gone").strip() == "gone"  # /run anew


BOOT_ID = "cat /proc/sys/kernel/random/boot_id"
HEALTH_0 = ("nvidia-smi --query-gpu=persistence_mode,gpu_recovery_action,remapped_rows.pending "
            "--format=csv,noheader -i 0")


def test_recover_resets_a_gpu_whose_driver_asks_for_it_without_a_reboot(sandbox, sandbox_inventory):
    host = "sbx3"
    sh(sandbox_inventory, host, "mkdir -p /run/fleet-sim && " + WANTS_RESET)
    boot = sh(sandbox_inventory, host, BOOT_ID)
    try:
        rc, plan, err = inv_json(sandbox, "recover", "--host", host, "--dry-run")
        assert rc == 0 and plan["action"] == "gpu-reset" and plan["steps"] == [], err[-2000:]
        assert plan["why"] == "GPU 0: the driver's recovery action is reset"
        rc, done, err = inv_json(sandbox, "recover", "--host", host)
        assert rc == 0 and done["ok"] and done["action"] == "gpu-reset", (done, err[-2000:])
        assert done["steps"] == ["GPU reset of 0", "probed again: no GPU fault"]
        assert "GPU 0: memory repair pending (a GPU reset applies it)" in done["faults_before"]
        assert sh(sandbox_inventory, host, BOOT_ID) == boot  # no reboot
        # persistence was turned off for the reset and is back on; the fault is cleared
        assert sh(sandbox_inventory, host, HEALTH_0).strip() == "Enabled, None, No"
        rc, facts, err = inv_json(sandbox, "probe", "--host", host)
        [probed] = facts if isinstance(facts, list) else facts["hosts"]
        assert {(e["code"], e["gpu_index"]) for e in probed["kernel_log"]["events"]} == {(48, 0), (154, 0)}
    finally:
        sh(sandbox_inventory, host, "rm -f /run/fleet-sim/kmsg /run/fleet-sim/gpustate")


def test_a_gpu_reset_that_a_process_outside_the_unit_blocks_becomes_a_reboot(sandbox, sandbox_inventory):
    host = "sbx3"
    # a process fleet did not start holds GPU 0 (registered as the simulator's workers are)
    sh(sandbox_inventory, host, "mkdir -p /run/fleet-sim/apps && " + WANTS_RESET + " && (setsid sleep 600 "
                                "</dev/null >/dev/null 2>&1 & echo \"0 518 python3\" > /run/fleet-sim/apps/$!)")
    boot, ran = sh(sandbox_inventory, host, BOOT_ID), running(sandbox_inventory, host)
    on = enabled(sandbox_inventory, host)
    rc, done, err = inv_json(sandbox, "recover", "--host", host)
    assert rc == 0 and done["ok"] and done["action"] == "reboot", (done, err[-2000:])
    assert done["steps"][0].startswith("GPU reset of 0: GPU 0 still has processes (")
    assert done["steps"][1:] == ["systemctl reboot", *started_again(ran, on), "probed again: no GPU fault"]
    assert running(sandbox_inventory, host) == ran
    assert sh(sandbox_inventory, host, BOOT_ID) != boot
    assert sh(sandbox_inventory, host, HEALTH_0).strip() == "Enabled, None, No"  # /run anew: as the profile says


class _Proxmox(BaseHTTPRequestHandler):
    """Proxmox's API for node pve1 and VM 101, whose reset power-cycles the sandbox host behind it."""

    sandbox = None
    host = ""
    calls: list[str] = []
    state = "running"

    def log_message(self, *args):
        pass

    def _answer(self, data) -> None:
        body = json.dumps({"data": data}).encode()
        self.send_response(200 if self.headers.get("Authorization") == f"PVEAPIToken=root@pam!fleet={TOKEN}"
                           else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        self.calls.append("GET " + self.path)
        if self.path.endswith("/hardware/pci"):
            return self._answer([{"id": "0000:01:00.0", "vendor": "0x10de", "device": "0x2bb1", "iommugroup": 14,
                                  "class": "0x030000"}])
        return self._answer({"status": self.state, "vmid": 101, "qmpstatus": self.state})

    def do_POST(self):  # noqa: N802
        self.calls.append("POST " + self.path)
        if self.path.endswith("/status/reset"):
            self.sandbox.kill(self.host)  # the VM's power button: no shutdown, then on again
            self.sandbox.start(self.host)
        elif self.path.endswith("/status/stop"):  # no shutdown: the power is cut
            self.sandbox.kill(self.host)
            type(self).state = "stopped"
        elif self.path.endswith("/status/start"):
            self.sandbox.start(self.host)
            type(self).state = "running"
        return self._answer("UPID:pve1:0000ABCD:0001:6790:qmreset:101:root@pam!fleet:")


TOKEN = "0d7c1f0e-5b0a-4a53-9d43-5a3f0e6d9c21"


def proxmox_guest(sandbox, host: str, tmp_path: Path, api=None) -> tuple[ThreadingHTTPServer, Path]:
    """The loopback Proxmox stand-in (`api`: another handler) serving `host` as VM 101 on pve1, and an inventory
    that says so."""
    api = api or _Proxmox
    server = ThreadingHTTPServer(("127.0.0.1", 0), api)
    api.sandbox, api.host, api.calls, api.state = sandbox, host, [], "running"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    doc = yaml.safe_load(Path(sandbox.cfg.inventory_path).read_text())
    doc["hosts"][host].setdefault("vars", {})["proxmox"] = {
        "api": f"http://127.0.0.1:{server.server_address[1]}/api2/json", "node": "pve1", "vmid": 101,
        "token_id": "root@pam!fleet", "token": {"env": "FLEET_TEST_PVE_TOKEN"}}
    inventory = inventory_file(tmp_path)
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    return server, inventory


def test_recover_resets_a_proxmox_guest_through_the_api_and_waits_for_it(sandbox, sandbox_inventory, tmp_path):
    host = "sbx2"
    server, inventory = proxmox_guest(sandbox, host, tmp_path)
    try:
        sh(sandbox_inventory, host, "mkdir -p /run/fleet-sim && " + LOST)
        proc = inv_at(inventory, "recover", "--host", host, "--json", env={"FLEET_TEST_PVE_TOKEN": TOKEN})
        done = json.loads(proc.stdout)
        assert proc.returncode == 0 and done["action"] == "vm-reset" and done["ok"], (done, proc.stderr[-2000:])
        assert done["steps"][0] == "NVIDIA functions on the node by IOMMU group: 14: 0000:01:00.0"
        assert _Proxmox.calls == ["GET /api2/json/nodes/pve1/hardware/pci",
                                  "GET /api2/json/nodes/pve1/qemu/101/status/current",
                                  "POST /api2/json/nodes/pve1/qemu/101/status/reset"]
        assert TOKEN not in proc.stdout + proc.stderr
    finally:
        server.shutdown()
        server.server_close()
        if not sandbox.is_running(host):
            sandbox.start(host)
        ssh_back(sandbox, sandbox_inventory, host)


class _BrokenProxmox(BaseHTTPRequestHandler):
    """A Proxmox API that answers every call with HTTP 500 (a node whose pveproxy is failing)."""

    calls: list[str] = []

    def log_message(self, *args):
        pass

    def _fail(self):
        self.calls.append(f"{self.command} {self.path}")
        body = b'{"data": null, "message": "internal error"}'
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _fail  # noqa: N815


def test_a_refused_gpu_reset_whose_vm_reset_fails_leaves_the_server_running_and_the_host_unlocked(
        sandbox, sandbox_inventory, tmp_path):
    """Another tenant's process holds the GPU, so the driver refuses the reset and recover turns to the VM reset;
    the Proxmox API fails. The unit recover stopped for the reset runs again, the host lock is released, and the
    error says both in one line (it used to exit with the unit stopped and the lock held)."""
    host = "sbx3"
    book = llama_playbook(tmp_path, rung("would-serve"), name="llama-before-recover")
    rc, data, err = inv_json(sandbox, "deploy", "--host", host, "--playbook", str(book), "--force")
    assert rc == 0 and serving(sandbox_inventory, host), err[-3000:]
    server, inventory = proxmox_guest(sandbox, host, tmp_path, _BrokenProxmox)
    sh(sandbox_inventory, host, "mkdir -p /run/fleet-sim/apps && " + WANTS_RESET + " && (setsid sleep 600 "
                                "</dev/null >/dev/null 2>&1 & echo \"0 518 python3\" > /run/fleet-sim/apps/$!)")
    boot = sh(sandbox_inventory, host, BOOT_ID)
    try:
        proc = inv_at(inventory, "recover", "--host", host, env={"FLEET_TEST_PVE_TOKEN": TOKEN})
        assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
        [said] = [line for line in proc.stderr.splitlines() if "HTTP 500" in line]
        assert "was started again (active)" in said and "the host lock was released" in said, proc.stderr
        assert [c.split()[0] for c in _BrokenProxmox.calls] == ["GET"] * len(_BrokenProxmox.calls)  # nothing sent
        assert sh(sandbox_inventory, host, BOOT_ID) == boot
        assert sh(sandbox_inventory, host, "test -e /var/lib/fleet/lock && echo held || echo free").strip() == "free"
        wait_for(lambda: serving(sandbox_inventory, host), what=f"{host} serving again")
    finally:
        server.shutdown()
        server.server_close()
        sh(sandbox_inventory, host, "for f in /run/fleet-sim/apps/*; do kill ${f##*/} 2>/dev/null; done; "
                                    "rm -rf /run/fleet-sim/apps /run/fleet-sim/kmsg /run/fleet-sim/gpustate")


def ssh_back(sandbox, inventory, host: str) -> None:
    """A host left without sshd (a test that failed half-way) is power-cycled: later tests need SSH there."""
    try:
        sh(inventory, host, "true")
    except Exception:
        sandbox.kill(host)
        sandbox.start(host)


def test_recover_power_cycles_a_guest_ssh_cannot_reach_only_when_told(sandbox, sandbox_inventory, tmp_path):
    host = "sbx4"
    server, inventory = proxmox_guest(sandbox, host, tmp_path)
    env = {"FLEET_TEST_PVE_TOKEN": TOKEN}
    try:
        sh(sandbox_inventory, host, "systemctl stop ssh")  # the guest runs, SSH gets no answer
        proc = inv_at(inventory, "recover", "--host", host, "--power-cycle", "--json", env=env)  # no --unreachable
        said = json.loads(proc.stdout)  # --json: the host's error is in the document, as every task's
        assert proc.returncode == 1 and _Proxmox.calls == [] and said["action"] == "none" and not said["ok"], said
        assert "connection refused" in said["error"] and f"inv recover --host {host} --unreachable" in said["error"]
        proc = inv_at(inventory, "recover", "--host", host, "--power-cycle", "--unreachable", "--dry-run", "--json",
                      env=env)
        plan = json.loads(proc.stdout)
        assert proc.returncode == 0 and plan["action"] == "vm-power-cycle" and plan["steps"] == [], proc.stderr
        assert plan["why"].startswith(f"SSH cannot reach it: {host} (") and "connection refused" in plan["why"]
        assert _Proxmox.calls == []  # a dry run asks nothing of the API
        proc = inv_at(inventory, "recover", "--host", host, "--power-cycle", "--unreachable", "--json", env=env)
        done = json.loads(proc.stdout)
        assert proc.returncode == 0 and done["ok"] and done["faults_after"] == [], (done, proc.stderr[-2000:])
        assert done["steps"][1:] == ["Proxmox vm-power-cycle of VM 101 on pve1", "probed again: no GPU fault"]
        assert _Proxmox.calls == ["GET /api2/json/nodes/pve1/hardware/pci",
                                  "GET /api2/json/nodes/pve1/qemu/101/status/current",
                                  "POST /api2/json/nodes/pve1/qemu/101/status/stop",
                                  "GET /api2/json/nodes/pve1/qemu/101/status/current",
                                  "POST /api2/json/nodes/pve1/qemu/101/status/start"]
        assert sh(sandbox_inventory, host, "systemctl is-active ssh").strip() == "active"  # its next boot
        assert TOKEN not in proc.stdout + proc.stderr
    finally:
        server.shutdown()
        server.server_close()
        if not sandbox.is_running(host):
            sandbox.start(host)
        ssh_back(sandbox, sandbox_inventory, host)


def test_recover_does_not_reset_a_guest_without_a_proxmox_description_or_one_that_refuses_us(
        sandbox, sandbox_inventory, tmp_path):
    host = "sbx4"
    server, inventory = proxmox_guest(sandbox, host, tmp_path)
    try:
        sh(sandbox_inventory, host, "systemctl stop ssh")
        proc = inv(sandbox, "recover", "--host", host)  # the inventory without vars.proxmox
        assert proc.returncode == 1 and "connection refused or unreachable" in proc.stderr, proc.stderr[-2000:]
        sandbox.kill(host)
        sandbox.start(host)
        # a host that answers and refuses our key: a reset would not make it trust us; nothing is asked of the API
        doc = yaml.safe_load(inventory.read_text())
        doc["hosts"][host]["user"] = "nobody"
        inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
        proc = inv_at(inventory, "recover", "--host", host, "--json", env={"FLEET_TEST_PVE_TOKEN": TOKEN})
        said = json.loads(proc.stdout)
        assert proc.returncode == 1 and _Proxmox.calls == [] and said["action"] == "none", (said, proc.stderr[-2000:])
        assert "nobody@" in said["error"] and "connection refused" not in said["error"]
    finally:
        server.shutdown()
        server.server_close()
        if not sandbox.is_running(host):
            sandbox.start(host)
        ssh_back(sandbox, sandbox_inventory, host)


def test_a_gpu_fault_mid_tune_ends_the_tune_and_teaches_the_fingerprint_nothing(sandbox, sandbox_inventory, tmp_path):
    """Xid 119 (GSP timeout) kills the first rung's server; the GPU still answers, so the next rung would serve
    and win, and the first would be learned as a crasher of this hardware, were the GPUs not probed again."""
    host = "sbx1"
    base = current(sandbox_inventory, host)
    small = {"gate": True, "input_len": 16, "output_len": 8, "num_prompts": 16, "max_concurrency": 16, "runs": 1,
             "timeout": 60}
    book = llama_playbook(tmp_path, rung("xid", SGLANG_SIM_XID="119:0") + rung("would-serve"), name="llama-tune-gpu",
                          bench=small)
    state = tmp_path / "state"
    try:
        rc, data, err = inv_json(sandbox, "tune", "--host", host, "--playbook", str(book), "--yes",
                                 env={"FLEET_STATE_DIR": str(state)})
        assert rc == 1 and data["status"] in ("rolled_back", "failed"), (data, err[-3000:])
        [attempt] = data["attempts"]  # the rung that would have served is never tried
        assert attempt["rung"] == "xid" and attempt["outcome"] == "GPU_FAULT", attempt
        assert attempt["evidence"].startswith("Xid 119 on GPU 0 x1: ") and "(the server said: " in attempt["evidence"]
        assert data["winner"] is None and data["error"]
        assert "GPU_FAULT: Xid 119" in err and "no further rungs" in err
        assert not (state / "known-good.json").exists()  # nothing learned, neither a winner nor a crasher
        assert current(sandbox_inventory, host) == base  # the release that served before is current again
    finally:
        sh(sandbox_inventory, host, "rm -f /run/fleet-sim/kmsg")


def test_a_tune_on_a_host_whose_gpu_is_lost_changes_nothing(sandbox, sandbox_inventory, tmp_path):
    host = "sbx1"
    before = sh(sandbox_inventory, host, "readlink /var/lib/fleet/current; systemctl show -p MainPID --value sglang")
    book = llama_playbook(tmp_path, rung("would-serve"), name="llama-tune-lost")
    try:
        bus = sh(sandbox_inventory, host, "mkdir -p /run/fleet-sim && " + LOST).strip()
        rc, data, err = inv_json(sandbox, "tune", "--host", host, "--playbook", str(book), "--yes")
        assert rc == 1 and data["status"] == "failed" and data["release"] is None, (data, err[-3000:])
        assert [(a["rung"], a["outcome"]) for a in data["attempts"]] == [("-", "GPU_FAULT")]
        assert data["error"] == (f"{host}: GPU fault, nothing was changed: GPU {bus.lower()} cannot be opened "
                                 f"(Unknown Error); Xid 79 on PCI {bus.lower()} x1 and nvidia-smi no longer lists it: "
                                 f"[ 901.5] NVRM: Xid (PCI:{bus}): 79, pid=1, GPU has fallen off the bus. "
                                 f"(inv recover --host {host})")
        assert sh(sandbox_inventory, host, "readlink /var/lib/fleet/current; "
                                           "systemctl show -p MainPID --value sglang") == before
    finally:
        sh(sandbox_inventory, host, "rm -f /run/fleet-sim/kmsg /run/fleet-sim/lost")


def test_a_rolling_deploy_counts_a_gpu_fault_host_as_failed_and_stops_before_the_next(
        sandbox, sandbox_inventory, tmp_path):
    """--serial 1 --max-fail 0 over sbx1, sbx3, sbx4 where sbx3 lost a GPU: sbx1 deploys, sbx3 fails as GPU_FAULT
    with nothing changed, and sbx4 is never contacted. (sbx1: the stand-in tests compare sbx0's and sbx2's live
    nvidia-smi answers with their profiles byte for byte; a server left running there would change them.)"""
    book = llama_playbook(tmp_path, PLAIN, name="llama-roll-gpu")
    untouched = {h: managed_digest(sandbox_inventory, h) for h in ("sbx3", "sbx4")}
    try:
        bus = sh(sandbox_inventory, "sbx3", "mkdir -p /run/fleet-sim && " + LOST).strip()
        rc, data, err = inv_json(sandbox, "deploy", "--host", "sbx1", "--host", "sbx3", "--host", "sbx4",
                                 "--playbook", str(book), "--serial", "1", "--max-fail", "0", "--yes",
                                 env={"FLEET_STATE_DIR": str(tmp_path / "state")})
        assert rc == 1, err[-3000:]
        assert [(h["host"], h["status"]) for h in data["hosts"]] == [("sbx1", "ok"), ("sbx3", "failed"),
                                                                     ("sbx4", "skipped")]
        faulty = data["hosts"][1]
        assert [(a["rung"], a["outcome"]) for a in faulty["attempts"]] == [("-", "GPU_FAULT")]
        assert f"GPU {bus.lower()} cannot be opened" in faulty["error"]
        assert [b["status"] for b in data["batches"]] == ["ok", "failed", "skipped"]
        assert data["stopped"] == "1 host failed, more than --max-fail 0 after batch 2 of 3; batch 3 not started"
        assert "sbx4 probing" not in err  # never contacted
        for h, digest in untouched.items():  # not a file of either changed
            assert managed_digest(sandbox_inventory, h) == digest, h
    finally:
        sh(sandbox_inventory, "sbx3", "rm -f /run/fleet-sim/kmsg /run/fleet-sim/lost")


def test_an_ecc_error_mid_deploy_is_recovered_by_a_gpu_reset_and_the_host_deploys_again(
        sandbox, sandbox_inventory, tmp_path):
    """The operator's whole path: Xid 48 under the server ends the ladder as GPU_FAULT (the GPU still answers, and
    asks for a reset), the next deploy changes nothing, `inv recover` resets the GPU without a reboot, and the
    deploy then serves."""
    host = "sbx3"
    book = llama_playbook(tmp_path, rung("dbe", SGLANG_SIM_XID="48:0") + rung("would-serve"), name="llama-dbe")
    fine = llama_playbook(tmp_path, rung("would-serve"), name="llama-after-reset")
    try:
        rc, data, err = inv_json(sandbox, "deploy", "--host", host, "--playbook", str(book), "--force")
        assert rc != 0 and [(a["rung"], a["outcome"]) for a in data["attempts"]] == [("dbe", "GPU_FAULT")], err[-3000:]
        assert data["attempts"][0]["evidence"].startswith("Xid 48 on GPU 0 x1: ")
        rc, again, err = inv_json(sandbox, "deploy", "--host", host, "--playbook", str(fine))
        assert rc == 1 and [(a["rung"], a["outcome"]) for a in again["attempts"]] == [("-", "GPU_FAULT")]
        assert "GPU 0: the driver's recovery action is reset" in again["error"]
        boot = sh(sandbox_inventory, host, BOOT_ID)
        rc, done, err = inv_json(sandbox, "recover", "--host", host)
        assert rc == 0 and done["action"] == "gpu-reset" and done["ok"], (done, err[-2000:])
        assert sh(sandbox_inventory, host, BOOT_ID) == boot
        rc, served, err = inv_json(sandbox, "deploy", "--host", host, "--playbook", str(fine))
        assert rc == 0 and served["status"] == "ok", err[-3000:]
        assert [(a["rung"], a["outcome"]) for a in served["attempts"]] == [("would-serve", "READY")]
        assert serving(sandbox_inventory, host)
    finally:
        sh(sandbox_inventory, host, "rm -f /run/fleet-sim/kmsg /run/fleet-sim/gpustate")
