"""`inv probe`'s tables: the health column, each GPU's health, faults, notes and Xid events under the host."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from fleet.cli import probe_view
from fleet.host.facts import Gpu, HostFacts
from fleet.host.gpuhealth import GpuHealth, KernelLog, LostGpu, XidEvent

XID79 = "[  812.10] NVRM: Xid (PCI:0000:04:00): 79, pid=1, GPU has fallen off the bus.\x1b[2J"


def host(name: str, fault: bool) -> HostFacts:
    gpus = [Gpu(index=0, name="NVIDIA RTX PRO 6000 Blackwell Workstation Edition", compute_cap="12.0",
                pci_bus_id="00000000:01:00.0",
                health=GpuHealth(recovery_action="none", temperature_c=41, clock_events=["hw_thermal_slowdown"]))]
    events = [XidEvent(pci="0000:04:00", code=79, count=2, last=XID79)] if fault else []
    return HostFacts(host=name, address="10.0.0.1", gpus=gpus, kernel_log=KernelLog(source="dmesg", events=events),
                     lost_gpus=[LostGpu(pci_bus_id="0000:04:00", reason="Unknown Error")] if fault else [])


@pytest.mark.parametrize("width", [80, 200])
def test_a_host_whose_gpu_fell_off_shows_fault_with_its_evidence_and_a_healthy_one_its_notes(width):
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    probe_view.render([host("gpu7", True), host("gpu8", False)], console)
    text = console.export_text()
    assert "FAULT (2)" in text and "notes (1)" in text
    assert "GPU fault: GPU 0000:04:00 cannot be opened (Unknown Error)" in text
    assert "Xid 79 on PCI 0000:04:00 x2, last:" in text and "\x1b" not in text
    assert "note: GPU 0: clocks held back (hw_thermal_slowdown)" in text
    assert "41 C" in text or width == 80  # at 80 columns the table may fold the temperature away


def test_gpu_health_cell_names_the_most_urgent_problem():
    assert probe_view.gpu_health(Gpu(health=GpuHealth(recovery_action="reset", ecc_uncorrected_volatile=3))) == (
        "recovery: reset, ECC 3", "bold red")
    assert probe_view.gpu_health(Gpu(health=GpuHealth(recovery_action="none"))) == ("ok", "green")
    assert probe_view.gpu_health(Gpu()) == ("-", "")


def test_an_unreached_hosts_error_names_the_host_once():
    """The fifth newcomer's hour: `sbx0: sbx0 (root@172.30.76.10:22): host key unknown ...`: the error already
    names its host (every library error does), and the view put the name before it again."""
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    unreached = HostFacts(host="sbx0", address="172.30.76.10", ok=False,
                          error="sbx0 (root@172.30.76.10:22): timed out connecting after 10s")
    other = HostFacts(host="sbx1", address="172.30.76.11", ok=False, error="the probe script sent nothing")
    probe_view.render([unreached, other], console)
    text = console.export_text()
    assert "sbx0: sbx0" not in text and "\nsbx0 (root@172.30.76.10:22): timed out" in text, text
    assert "sbx1: the probe script sent nothing" in text, text
