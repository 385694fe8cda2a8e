"""GPU health facts: the recorded H200's answers, Xid counting by the real probe script, hostile logs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from fleet.host import gpuhealth as H
from fleet.host import nvsmi, probe, programs

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu-health"


def test_recorded_h200_health_query_parses_to_typed_facts():
    rows = nvsmi.parse_query_gpu((FIXTURES / "query_health_h200_580.txt").read_text()).rows
    [h] = [H.health_from_row(r) for r in rows]
    assert h.model_dump() == {
        "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0, "retired_pages_pending": None,
        "retired_pages_double_bit": None, "remapped_rows_pending": False, "remapped_rows_failed": False,
        "clock_events": ["gpu_idle"], "temperature_c": 31, "persistence": True, "recovery_action": None}


def test_recorded_h200_answers_the_recovery_action_field_as_nvidia_smi_q_does():
    misc = (FIXTURES / "misc_h200_580.txt").read_text()
    answer = re.search(r"== query gpu_recovery_action\ngpu_recovery_action\n(.*)\n", misc).group(1)
    q = re.search(r"GPU Recovery Action\s+: (.*)", (FIXTURES / "nvidia_smi_q_h200_580.txt").read_text()).group(1)
    assert answer == q == "None" and H.recovery_action(answer) == "none"
    # the old field name is answered under the new one: the probe asks for the one every driver knows
    assert "== query clocks_throttle_reasons.active\nclocks_event_reasons.active\n" in misc


def test_recovery_actions_and_clock_reasons_decode():
    assert H.recovery_action("GPU Reset Required") == "reset"
    assert H.recovery_action("Node Reboot Required") == "reboot"
    assert H.recovery_action("Drain P2P") == "drain_p2p"
    assert H.recovery_action("[N/A]".strip("[]")) == "n/a"
    assert H.recovery_action("\x1b[31mweird") == "?[31mweird"
    assert H.clock_events("0x0000000000000044") == ["sw_power_cap", "hw_thermal_slowdown"]
    assert H.clock_events("garbage") == [] and H.clock_events(None) == []


def test_kernel_log_takes_the_first_source_that_read_it_and_says_why_others_could_not():
    text = ("source journalctl rc=0 lines=1 denied\n"
            "source dmesg rc=0 lines=900\n"
            "xid 0000:04:00 79 2 [  812.1] NVRM: Xid (PCI:0000:04:00): 79, pid=1, GPU has fallen off the bus.\n"
            "xid 0000:04:00 154 1 [  812.2] NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed\n")
    log = H.parse_kernel_log(text)
    assert log.source == "dmesg" and log.problem is None
    assert [(e.pci, e.code, e.count) for e in log.events] == [("0000:04:00", 79, 2), ("0000:04:00", 154, 1)]
    none = H.parse_kernel_log("source journalctl rc=0 lines=0\nsource dmesg rc=1 lines=1\n")
    assert none.source is None and none.problem == "kernel log not readable: journalctl (no kernel lines), dmesg (rc=1)"
    assert H.parse_kernel_log("").problem == "kernel log not readable: neither journalctl nor dmesg"


def test_hostile_kernel_log_rows_are_bounded_and_cleaned():
    rows = "".join(f"xid 0000:{i % 256:02x}:00 79 1 line\x1b[2J{'x' * 900}\n" for i in range(200))
    log = H.parse_kernel_log("source dmesg rc=0 lines=5\n" + rows + "xid nonsense\nxid 0000:01:00 99999 1 x\n")
    assert len(log.events) == H.MAX_EVENTS
    assert all(len(e.last) == H.MAX_LINE and "\x1b" not in e.last for e in log.events)


def test_lost_gpus_from_nvidia_smi_errors():
    text = ("Unable to determine the device handle for GPU0000:04:00.0: Unknown Error\n"
            "Unable to determine the device handle for GPU 00000000:05:00.0: GPU is lost.  Reboot the system\n")
    assert [(g.pci_bus_id, g.reason) for g in H.lost_gpus(text)] == [
        ("0000:04:00", "Unknown Error"), ("0000:05:00", "GPU is lost.  Reboot the system")]


def test_the_probe_as_run_on_the_h200_reads_health_and_its_kernel_log():
    """probe.sh of this branch run on the lent H200 (no journalctl there: dmesg read, no Xid since boot)."""


    f = probe.parse((FIXTURES / "probe_output_h200_580.txt").read_text(), "h200", "127.0.0.1")
    [gpu] = f.gpus
    assert gpu.health is not None and gpu.health.recovery_action == "none" and gpu.health.temperature_c == 37
    assert f.kernel_log is not None and f.kernel_log.source == "dmesg" and f.kernel_log.events == []
    assert f.lost_gpus == []


def _kernel_log_through(tmp_path: Path, dmesg: str) -> H.KernelLog:
    """xid.sh's kernel_log under sh, where journalctl has no kernel lines (as in a container) and `dmesg` is
    the script DMESG: what the probe prints for it, parsed."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name, body in (("journalctl", "exit 0"), ("dmesg", dmesg)):
        (bin_ / name).write_text("#!/bin/sh\n" + body + "\n")
        (bin_ / name).chmod(0o755)
    script = programs.text("xid.sh") + "\nT=\nkernel_log\n"
    env = {"PATH": f"{bin_}:/usr/bin:/bin"}
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=False).stdout
    return H.parse_kernel_log(out)


XID_79 = "[  812.1] NVRM: Xid (PCI:0000:04:00): 79, pid=1, GPU has fallen off the bus."


def test_a_kernel_line_saying_operation_not_permitted_hides_no_xid(tmp_path):
    # the recorded H200's dmesg, plus a line any process can log (a denied mount), then an Xid
    recorded = (FIXTURES / "kernel_log_h200_firecracker.txt").read_text().split("== dmesg\n")[1]
    kernel = recorded.split("== dmesg NVRM")[0] + "[  800.0] overlayfs: mount: Operation not permitted\n"
    (tmp_path / "kmsg").write_text(kernel + XID_79 + "\n")
    log = _kernel_log_through(tmp_path, f"cat {tmp_path / 'kmsg'}")
    assert log.problem is None and log.source == "dmesg"
    assert [(e.pci, e.code, e.count) for e in log.events] == [("0000:04:00", 79, 1)]


def test_the_reading_tool_refusing_on_its_stderr_is_unreadable_whatever_it_printed(tmp_path):
    # dmesg under dmesg_restrict: the message on stderr, rc 1 (util-linux dmesg's words)
    refused = _kernel_log_through(tmp_path, "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; "
                                            "exit 1")
    assert refused.source is None and refused.problem == ("kernel log not readable: journalctl (no kernel lines), "
                                                          "dmesg (permission denied)")
