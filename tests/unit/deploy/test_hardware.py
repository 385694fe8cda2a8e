"""fleet.deploy.hardware: when the GPUs, not the flags, are why a host cannot serve."""

from __future__ import annotations

import re
from pathlib import Path

from fleet.deploy import evidence, hardware
from fleet.host import probe
from fleet.host.facts import Gpu, HostFacts
from fleet.host.gpuhealth import GpuHealth, KernelLog, LostGpu, XidEvent

XID79 = "[  812.10] NVRM: Xid (PCI:0000:04:00): 79, pid=1, GPU has fallen off the bus."
XID13 = "[  813.01] NVRM: Xid (PCI:0000:01:00): 13, pid=9, name=python3, Graphics SM Warp Exception"


def facts(*events: XidEvent, lost: bool = False, **health) -> HostFacts:
    gpus = [Gpu(index=0, pci_bus_id="00000000:01:00.0", health=GpuHealth(recovery_action="none", **health))]
    if not lost:
        gpus.append(Gpu(index=3, pci_bus_id="00000000:04:00.0", health=GpuHealth(recovery_action="none")))
    return HostFacts(host="h", address="a", gpus=gpus, kernel_log=KernelLog(source="dmesg", events=list(events)),
                     lost_gpus=[LostGpu(pci_bus_id="0000:04:00", reason="Unknown Error")] if lost else [])


def test_a_healthy_host_has_no_fault_and_an_application_xid_is_not_one():
    assert hardware.assess(facts(XidEvent(pci="0000:01:00", code=13, count=1, last=XID13, gpu_index=0))).fault == []


def test_a_gpu_off_the_bus_is_a_fault_with_its_xid_as_evidence():
    hw = hardware.assess(facts(XidEvent(pci="0000:04:00", code=79, count=2, last=XID79), lost=True))
    assert hw.fault == ["GPU 0000:04:00 cannot be opened (Unknown Error)",
                        f"Xid 79 on PCI 0000:04:00 x2 and nvidia-smi no longer lists it: {XID79}"]


def test_a_past_hardware_xid_on_a_gpu_that_answers_again_is_a_note_not_a_fault():
    hw = hardware.assess(facts(XidEvent(pci="0000:04:00", code=79, count=1, last=XID79, gpu_index=3)))
    assert hw.fault == [] and hw.notes == [f"Xid 79 on GPU 3 x1 since boot (the GPU answers now): {XID79}"]


def test_recovery_action_and_pending_repair_are_faults_uncorrectable_ecc_and_slowdowns_notes():
    hw = hardware.assess(facts(ecc_uncorrected_volatile=2, remapped_rows_pending=True,
                               clock_events=["gpu_idle", "hw_thermal_slowdown"]))
    assert hw.fault == ["GPU 0: memory repair pending (a GPU reset applies it)"]
    assert hw.notes == ["GPU 0: 2 uncorrectable ECC errors since the driver loaded",
                        "GPU 0: clocks held back (hw_thermal_slowdown)"]
    reset = facts()
    reset.gpus[0].health.recovery_action = "reboot"
    assert hardware.assess(reset).fault == ["GPU 0: the driver's recovery action is reboot"]


def test_new_faults_are_the_hardware_xids_and_state_that_appeared_between_two_probes():
    before = facts(XidEvent(pci="0000:04:00", code=79, count=1, last=XID79, gpu_index=3))
    same = facts(XidEvent(pci="0000:04:00", code=79, count=1, last=XID79, gpu_index=3))
    assert hardware.new_faults(before, same) == []
    app = facts(XidEvent(pci="0000:01:00", code=13, count=5, last=XID13, gpu_index=0))
    assert hardware.new_faults(before, app) == []
    fell = facts(XidEvent(pci="0000:04:00", code=79, count=2, last=XID79), lost=True)
    assert hardware.new_faults(before, fell) == [f"Xid 79 on PCI 0000:04:00 x2: {XID79}",
                                                 "GPU 0000:04:00 cannot be opened (Unknown Error)"]


def test_a_rung_the_hardware_failed_is_never_remembered_as_known_bad():
    record = evidence.add({}, "r", {}, "h1", "GPU_FAULT", "t")["r"]
    record = evidence.add({"r": record}, "r", {}, "h2", "GPU_FAULT", "t")["r"]
    assert "GPU_FAULT" not in evidence.HARDWARE and evidence.skip_reason(record) is None


PROBE_H200 = Path(__file__).resolve().parents[2] / "fixtures/gpu-health/probe_output_h200_580.txt"
SMI_DEAD = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.")
DENIED = "source journalctl rc=1 lines=0 denied\nsource dmesg rc=1 lines=0 denied"


def section(text: str, name: str, body: str, rc: int) -> str:
    """The recorded H200 probe with one section's answer replaced (what the host would say instead)."""
    return re.sub(rf"@@fleet:begin {name}@@\n.*?@@fleet:end {name} rc=\d+@@",
                  lambda m: f"@@fleet:begin {name}@@\n{body}\n@@fleet:end {name} rc={rc}@@", text, flags=re.S)


def test_a_driver_that_lost_every_gpu_under_a_rung_is_a_gpu_fault_without_a_kernel_log():
    """nvidia-smi fails entirely after the attempt and the login cannot read the kernel log: no Xid to go by."""
    recorded = section(PROBE_H200.read_text(), "xid", DENIED, 0)
    before = probe.parse(recorded, "h", "a")
    after = probe.parse(section(section(recorded, "query-gpu", SMI_DEAD, 9), "health-gpu", SMI_DEAD, 9), "h", "a")
    assert len(before.gpus) == 1 and after.gpus == [] and hardware.assess(before).fault == []
    fault = f"nvidia-smi lists no GPU: nvidia-smi --query-gpu failed (rc=9): {SMI_DEAD}"
    assert hardware.new_faults(before, after) == [fault]
    assert hardware.assess(after).fault == [fault]  # a tune or deploy does not start on it either


def test_a_gpu_that_silently_leaves_the_list_is_a_gpu_fault():
    before = facts()
    after = facts()
    after.gpus = after.gpus[:1]  # 2 -> 1, no Xid, nothing nvidia-smi calls lost
    assert hardware.new_faults(before, after) == ["2 GPUs before the attempt, 1 after: 0000:04:00 no longer listed"]
    assert hardware.new_faults(before, facts()) == []


def test_a_gpu_nvidia_smi_calls_lost_is_not_counted_twice():
    lost = facts(lost=True)
    assert hardware.new_faults(facts(), lost) == ["GPU 0000:04:00 cannot be opened (Unknown Error)"]
