"""Is the hardware at fault? Judged from a probe's health facts (fleet.host.gpuhealth), pure.

A deploy asks before it changes anything (a host whose GPU is lost or wants a reset is not deployed to) and
again after an attempt that did not serve (new hardware Xids since the first probe, a GPU now lost, fewer GPUs
listed than before, or nvidia-smi no longer able to list any, make the attempt's outcome GPU_FAULT and end
the ladder: no flag fixes a GPU off the bus). Which Xid codes are the hardware's is the log rules' word
(playbooks/rules/gpu-hardware.yaml), each with its catalog source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.host.facts import HostFacts
from fleet.host.gpuhealth import SLOWDOWNS, XidEvent, pci_key
from fleet.logs.classify import classify_line
from fleet.logs.rules import LogClass, RuleSet


@dataclass(frozen=True)
class Hardware:
    """fault: the reasons the hardware cannot serve now (empty: none); notes: what an operator should see."""

    fault: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def evidence(self) -> str:
        return "; ".join(self.fault)


def hardware_xid(event: XidEvent, rules: RuleSet | None = None) -> bool:
    """The event's line is one the rules call GPU_FAULT (the GPU or its link, not the application)."""
    match = classify_line(event.last, rules)
    return match is not None and match.rule.log_class is LogClass.GPU_FAULT


def _xid_text(e: XidEvent) -> str:
    where = f"GPU {e.gpu_index}" if e.gpu_index is not None else f"PCI {e.pci}"
    return f"Xid {e.code} on {where} x{e.count}"


def assess(facts: HostFacts, rules: RuleSet | None = None) -> Hardware:
    """The state the GPUs are in now. A hardware Xid in the log since boot is a fault only while its GPU is
    missing or unusable; on a GPU that answers healthy again (reset since) it is a note."""
    fault: list[str] = []
    notes: list[str] = []
    if facts.smi_error:  # the driver answers nothing: no GPU can serve (an empty list is not a healthy one)
        fault.append(f"nvidia-smi lists no GPU: {facts.smi_error}")
    for lost in facts.lost_gpus:
        fault.append(f"GPU {lost.pci_bus_id} cannot be opened ({lost.reason})")
    for gpu in facts.gpus:
        h = gpu.health
        if h is None:
            continue
        name = f"GPU {gpu.index}"
        if h.recovery_action not in (None, "none"):
            fault.append(f"{name}: the driver's recovery action is {h.recovery_action}")
        if h.remapped_rows_failed:
            fault.append(f"{name}: a row remapping failed (the board needs service)")
        if h.remapped_rows_pending or h.retired_pages_pending:
            fault.append(f"{name}: memory repair pending (a GPU reset applies it)")
        if h.ecc_uncorrected_volatile:  # the repair they call for (remap, reset) is what makes them a fault
            notes.append(f"{name}: {h.ecc_uncorrected_volatile} uncorrectable ECC errors since the driver loaded")
        slow = [r for r in h.clock_events if r in SLOWDOWNS]
        if slow:
            notes.append(f"{name}: clocks held back ({', '.join(slow)})")
    listed = {g.index for g in facts.gpus}
    lost_buses = {x.pci_bus_id for x in facts.lost_gpus}
    for event in facts.kernel_log.events if facts.kernel_log else []:
        if not hardware_xid(event, rules):
            continue
        if event.pci in lost_buses or event.gpu_index is None or event.gpu_index not in listed:
            fault.append(f"{_xid_text(event)} and nvidia-smi no longer lists it: {event.last}")
        else:
            notes.append(f"{_xid_text(event)} since boot (the GPU answers now): {event.last}")
    return Hardware(fault=fault, notes=notes)


def new_faults(before: HostFacts, after: HostFacts, rules: RuleSet | None = None) -> list[str]:
    """What the hardware did between two probes: hardware Xids that are new (or more frequent), and faults
    of the second probe's state that the first did not have."""
    seen = {(e.pci, e.code): e.count for e in (before.kernel_log.events if before.kernel_log else [])}
    found = [f"{_xid_text(e)}: {e.last}" for e in (after.kernel_log.events if after.kernel_log else [])
             if e.count > seen.get((e.pci, e.code), 0) and hardware_xid(e, rules)]
    earlier = set(assess(before, rules).fault)
    found += [f for f in assess(after, rules).fault if f not in earlier and not f.startswith("Xid ")]
    listed = {pci_key(g.pci_bus_id) or f"GPU {g.index}" for g in after.gpus}
    lost = {pci_key(x.pci_bus_id) for x in after.lost_gpus}
    gone = [key for g in before.gpus if (key := pci_key(g.pci_bus_id) or f"GPU {g.index}") not in listed
            and key not in lost]
    if after.ok and gone and not after.smi_error:  # a GPU that left without a word (no Xid the login can read)
        found.append(f"{len(before.gpus)} GPUs before the attempt, {len(after.gpus)} after: "
                     f"{', '.join(gone[:8])}{' ...' if len(gone) > 8 else ''} no longer listed")
    return found

