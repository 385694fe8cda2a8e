"""GPU health as the probe reads it (pure: text in, typed facts out): the health fields of
`nvidia-smi --query-gpu` (section health-gpu) and the NVIDIA driver's Xid reports in the kernel log since boot
(section xid, counted on the host by probe.sh's awk). What the codes mean is the log rules' business
(playbooks/rules/gpu-hardware.yaml); fleet.deploy.hardware judges these facts with them.
Recorded real outputs: tests/fixtures/gpu-health (an H200 on driver 580)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

# What nvidia-smi --query-gpu names each health fact (probe.sh asks for these; older drivers reject some,
# and the probe asks again without them). clocks_throttle_reasons.active is the name every driver knows;
# newer ones print it as clocks_event_reasons.active.
HEALTH_FIELDS = (
    "index", "pci.bus_id", "ecc.errors.uncorrected.volatile.total", "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.pending", "retired_pages.double_bit.count", "remapped_rows.pending", "remapped_rows.failure",
    "clocks_throttle_reasons.active", "temperature.gpu", "persistence_mode", "gpu_recovery_action",
)

# nvml.h's nvmlClocksEventReason* bits, by the names nvidia-smi's query fields give them.
CLOCK_EVENT_BITS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"), (0x100, "display_clock_setting"),
)
# Reasons that say the hardware is held back (heat, power brake), not that it is idle or capped by choice.
SLOWDOWNS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})

# nvmlGpuRecoveryAction_t as nvidia-smi words it (-q and the gpu_recovery_action field), most severe last.
RECOVERY_ACTIONS = {"none": "none", "gpu reset required": "reset", "reset": "reset", "gpu reset": "reset",
                    "node reboot required": "reboot", "reboot": "reboot", "node reboot": "reboot",
                    "drain p2p": "drain_p2p", "drain and reset": "drain_and_reset"}

MAX_EVENTS = 64  # distinct (GPU, code) pairs kept: a hostile or broken log cannot grow the facts further
MAX_LINE = 300  # characters of an event's last line kept (probe.sh cuts there too)


class GpuHealth(BaseModel):
    """One GPU's health fields; None where the driver did not say (N/A, not supported, field unknown)."""

    ecc_uncorrected_volatile: int | None = None  # since the driver loaded
    ecc_uncorrected_aggregate: int | None = None  # over the board's life
    retired_pages_pending: bool | None = None  # pages waiting for a reset/reboot to be retired (pre-Ampere)
    retired_pages_double_bit: int | None = None
    remapped_rows_pending: bool | None = None  # a row remap waits for a GPU reset (Ampere and later)
    remapped_rows_failed: bool | None = None  # a remap failed: the board needs service
    clock_events: list[str] = Field(default_factory=list)  # active clock-event (throttle) reasons
    temperature_c: int | None = None
    persistence: bool | None = None
    recovery_action: str | None = None  # none | reset | reboot | drain_p2p | drain_and_reset | the driver's word


class LostGpu(BaseModel):
    """A GPU nvidia-smi could not open ('Unable to determine the device handle for GPU...')."""

    pci_bus_id: str
    reason: str


class XidEvent(BaseModel):
    """Xid reports of one code for one GPU since boot: how many, and the last line as the log had it."""

    model_config = ConfigDict(frozen=True)

    pci: str  # "0000:01:00", as the driver names the GPU in Xid lines
    code: int
    count: int
    last: str
    gpu_index: int | None = None  # the GPU with this bus id in --query-gpu, when there is one


class KernelLog(BaseModel):
    """Xid events since boot and where they were read (journalctl -k or dmesg); source None: unreadable."""

    model_config = ConfigDict(frozen=True)

    source: str | None = None
    events: list[XidEvent] = Field(default_factory=list)
    problem: str | None = None  # why neither source could be read, for a warning


def pci_key(bus_id: str | None) -> str | None:
    """'00000000:01:00.0' (nvidia-smi) and '0000:01:00' (Xid lines) to one key: '0000:01:00'."""
    m = re.fullmatch(r"(?:[0-9a-fA-F]{4})?([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?",
                     (bus_id or "").strip())
    return f"{m.group(1)}:{m.group(2)}:{m.group(3)}".lower() if m else None


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and re.fullmatch(r"\d{1,12}", value.strip()) else None


def _yes_no(value: str | None) -> bool | None:
    word = (value or "").strip().lower()
    return {"yes": True, "no": False, "enabled": True, "disabled": False}.get(word)


def clock_events(mask: str | None) -> list[str]:
    """The active reasons of a clocks_event_reasons.active bitmask ('0x0000000000000001' -> ['gpu_idle'])."""
    m = re.fullmatch(r"0x([0-9a-fA-F]{1,16})", (mask or "").strip())
    if not m:
        return []
    bits = int(m.group(1), 16)
    return [name for bit, name in CLOCK_EVENT_BITS if bits & bit]


def recovery_action(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    word = re.sub(r"\s+", " ", value.strip().lower())
    return RECOVERY_ACTIONS.get(word, printable(word)[:40])


def health_from_row(row: dict[str, str | None]) -> GpuHealth:
    """A row of parse_query_gpu (fleet.host.nvsmi) over HEALTH_FIELDS, N/A already None."""
    return GpuHealth(
        ecc_uncorrected_volatile=_int(row.get("ecc.errors.uncorrected.volatile.total")),
        ecc_uncorrected_aggregate=_int(row.get("ecc.errors.uncorrected.aggregate.total")),
        retired_pages_pending=_yes_no(row.get("retired_pages.pending")),
        retired_pages_double_bit=_int(row.get("retired_pages.double_bit.count")),
        remapped_rows_pending=_yes_no(row.get("remapped_rows.pending")),
        remapped_rows_failed=_yes_no(row.get("remapped_rows.failure")),
        clock_events=clock_events(row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active")),
        temperature_c=_int(row.get("temperature.gpu")),
        persistence=_yes_no(row.get("persistence_mode")),
        recovery_action=recovery_action(row.get("gpu_recovery_action")),
    )


_LOST = re.compile(r"Unable to determine the device handle for GPU ?([0-9A-Fa-f:.]+): (.{0,120})")


def lost_gpus(text: str) -> list[LostGpu]:
    """GPUs nvidia-smi names as unreachable in any of its outputs (a GPU off the bus, lost, or unknown)."""
    found: dict[str, LostGpu] = {}
    for m in _LOST.finditer(text):
        bus = pci_key(m.group(1))
        if bus and bus not in found:
            found[bus] = LostGpu(pci_bus_id=bus, reason=printable(m.group(2)).strip().rstrip("."))
    return list(found.values())


def printable(text: str) -> str:
    """Host text with control characters (escapes, carriage returns) replaced: it ends up in tables."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f]", "?", text)


_SOURCE = re.compile(r"^source (journalctl|dmesg) rc=(\d+) lines=(\d+)(?: (denied))?$")
_XID = re.compile(r"^xid ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])? (\d{1,4}) (\d{1,9}) (.*)$")


def parse_kernel_log(text: str) -> KernelLog:
    """probe.sh's xid section: per source tried, `source NAME rc=N lines=N [denied]` then its
    `xid PCI CODE COUNT LAST-LINE` rows. The first source that read the kernel log gives the events."""
    tried: list[str] = []
    current: str | None = None
    usable = False
    source: str | None = None
    events: list[XidEvent] = []
    for line in text.splitlines():
        if m := _SOURCE.match(line):
            if source:
                break
            name, rc, lines, denied = m.group(1), int(m.group(2)), int(m.group(3)), bool(m.group(4))
            usable = rc == 0 and lines > 0 and not denied
            current = name
            if usable:
                source = name
            else:
                why = "permission denied" if denied else (f"rc={rc}" if rc else "no kernel lines")
                tried.append(f"{name} ({why})")
        elif current and usable and (x := _XID.match(line)) and len(events) < MAX_EVENTS:
            events.append(XidEvent(pci=x.group(1).lower(), code=int(x.group(2)), count=int(x.group(3)),
                                   last=printable(x.group(4))[:MAX_LINE]))
    if source is None:
        return KernelLog(events=events, problem="kernel log not readable: "
                         + (", ".join(tried) if tried else "neither journalctl nor dmesg"))
    return KernelLog(source=source, events=events)
